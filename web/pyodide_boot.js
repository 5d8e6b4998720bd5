// Booting Pyodide and the engine wheel from this origin, shared by the engine worker (worker.js) and the test worker
// (tests/store_worker.js). Nothing is fetched from a CDN: Pyodide, micropip and the engine all come from this origin.

const ORIGIN_URL = self.location.href;
export const PYODIDE_URL = new URL('/pyodide/', ORIGIN_URL).href;
const ENGINE_API_URL = new URL('/api/engine', ORIGIN_URL).href;
const WHEEL_DIR = '/wheels'; // in Pyodide's in-memory file system

export async function fetchOk(url, init) {
  const response = await fetch(url, init);
  if (!response.ok) throw new Error(`GET ${url} failed: HTTP ${response.status} ${response.statusText}`);
  return response;
}

export async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

// Pyodide's lock file names micropip's wheel with the hash of the build Pyodide made, and the vendored wheel is
// PyPI's build of the same version (other bytes). Point the lock at the vendored wheel with its real hash, so
// loadPackage's integrity check passes and nothing is looked up on the CDN.
async function patchedLockFile() {
  const lock = await (await fetchOk(new URL('pyodide-lock.json', PYODIDE_URL))).json();
  const entry = lock.packages?.micropip;
  if (!entry) throw new Error('pyodide-lock.json has no micropip entry');
  const wheelUrl = new URL(`/wheels/${entry.file_name.split('/').pop()}`, ORIGIN_URL).href;
  const wheel = await (await fetchOk(wheelUrl)).arrayBuffer();
  entry.sha256 = await sha256Hex(wheel);
  entry.file_name = wheelUrl;
  return lock;
}

// The vendored Pyodide with the patched lock file; `options` go to loadPyodide (stdout, stderr, ...).
export async function loadLocalPyodide(options = {}) {
  const lockFileContents = await patchedLockFile();
  const { loadPyodide } = await import(new URL('pyodide.mjs', PYODIDE_URL).href);
  return loadPyodide({ indexURL: PYODIDE_URL, packageBaseUrl: PYODIDE_URL, lockFileContents, ...options });
}

export async function loadMicropip(pyodide) {
  await pyodide.loadPackage('micropip', { messageCallback: () => {} });
  return pyodide.pyimport('micropip');
}

// Fetch the engine wheel ourselves (revalidating, so an edited source is picked up on reload), drop it into
// Pyodide's file system and let micropip install it from there.
export async function installEngine(pyodide, micropip) {
  const { wheel } = await (await fetchOk(ENGINE_API_URL, { cache: 'no-store' })).json();
  const wheelUrl = new URL(wheel, ORIGIN_URL);
  const bytes = new Uint8Array(await (await fetchOk(wheelUrl, { cache: 'no-cache' })).arrayBuffer());
  const name = decodeURIComponent(wheelUrl.pathname.split('/').pop());
  pyodide.FS.mkdirTree(WHEEL_DIR);
  pyodide.FS.writeFile(`${WHEEL_DIR}/${name}`, bytes);
  // deps=False: the engine is pure stdlib, and a dependency lookup would go to PyPI.
  await micropip.install.callKwargs(`emfs:${WHEEL_DIR}/${name}`, { deps: false, reinstall: true });
  return { url: wheelUrl.href, bytes: bytes.length, sha256: await sha256Hex(bytes) };
}
