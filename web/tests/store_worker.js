// Test worker for the store's browser tests: boots Pyodide and the engine wheel from this origin (the same steps
// as web/worker.js, shared in web/pyodide_boot.js), then runs Python snippets sent by store_test.js:
//   {id, code} -> {id, ok, value} | {id, ok: false, error}
// The snippet's last expression is the value (converted to plain JS). Snippets share one globals namespace.
import { installEngine, loadLocalPyodide, loadMicropip } from '../pyodide_boot.js';

let pyodide = null;
let booting = null;

async function boot() {
  pyodide = await loadLocalPyodide();
  const micropip = await loadMicropip(pyodide);
  await installEngine(pyodide, micropip);
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
