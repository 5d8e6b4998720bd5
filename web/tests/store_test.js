// Page side of the store's browser tests (tests/browser/store.spec.js): one test worker running Python.
//   await window.storeTest.boot()          Pyodide + engine wheel in the worker
//   await window.storeTest.py(code)        run a snippet there, get its last expression back
const worker = new Worker(new URL('./store_worker.js', import.meta.url), { type: 'module' });
const waiting = new Map();
let nextId = 0;

worker.onmessage = (event) => {
  const { id, ok, value, error } = event.data;
  const p = waiting.get(id);
  waiting.delete(id);
  if (ok) p.resolve(value);
  else p.reject(new Error(error));
};
worker.onerror = (event) => {
  for (const p of waiting.values()) p.reject(new Error(`test worker failed: ${event.message}`));
  waiting.clear();
};

function call(code) {
  const id = ++nextId;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    worker.postMessage({ id, code });
  });
}

window.storeTest = { boot: () => call(null), py: (code) => call(code) };
document.body.dataset.ready = 'true';
