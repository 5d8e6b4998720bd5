// Test worker for the store's browser tests: boots Pyodide and the engine wheel from this origin (the same steps
// as web/worker.js, which does not export them), then runs Python snippets sent by store_test.js:
//   {id, code} -> {id, ok, value} | {id, ok: false, error}
// The snippet's last expression is the value (converted to plain JS). Snippets share one globals namespace.
const ORIGIN_URL = self.location.href;
const PYODIDE_URL = new URL('/pyodide/', ORIGIN_URL).href;

let pyodide = null;
let booting = null;

async function fetchOk(url) {
  const response = await fetch(url, { cache: 'no-cache' });
  if (!response.ok) throw new Error(`GET ${url} failed: HTTP ${response.status}`);
  return response;
}

async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

async function boot() {
  // The lock file names Pyodide's own micropip build; point it at the vendored PyPI wheel with its real hash.
  const lock = await (await fetchOk(new URL('pyodide-lock.json', PYODIDE_URL))).json();
  const entry = lock.packages.micropip;
  const wheelUrl = new URL(`/wheels/${entry.file_name.split('/').pop()}`, ORIGIN_URL).href;
  entry.sha256 = await sha256Hex(await (await fetchOk(wheelUrl)).arrayBuffer());
  entry.file_name = wheelUrl;
  const { loadPyodide } = await import(new URL('pyodide.mjs', PYODIDE_URL).href);
  pyodide = await loadPyodide({ indexURL: PYODIDE_URL, packageBaseUrl: PYODIDE_URL, lockFileContents: lock });
  await pyodide.loadPackage('micropip', { messageCallback: () => {} });
  const micropip = pyodide.pyimport('micropip');
  const { wheel } = await (await fetchOk(new URL('/api/engine', ORIGIN_URL))).json();
  const url = new URL(wheel, ORIGIN_URL);
  const bytes = new Uint8Array(await (await fetchOk(url)).arrayBuffer());
  const name = decodeURIComponent(url.pathname.split('/').pop());
  pyodide.FS.mkdirTree('/engine-wheels');
  pyodide.FS.writeFile(`/engine-wheels/${name}`, bytes);
  await micropip.install.callKwargs(`emfs:/engine-wheels/${name}`, { deps: false, reinstall: true });
  micropip.destroy();
  return { python: pyodide.runPython('import sys; sys.version.split()[0]') };
}

function toPlain(value) {
  if (value && typeof value.toJs === 'function') {
    const plain = value.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false });
    value.destroy();
    return plain;
  }
  return value;
}

self.onmessage = async (event) => {
  const { id, code } = event.data;
  try {
    booting ??= boot();
    const info = await booting;
    const value = code === null ? info : toPlain(await pyodide.runPythonAsync(code));
    self.postMessage({ id, ok: true, value });
  } catch (err) {
    self.postMessage({ id, ok: false, error: String(err?.message ?? err) });
  }
};
