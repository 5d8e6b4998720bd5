// The engine worker (a module worker): boots Pyodide from the local server, installs the engine wheel with
// micropip and hands every request after "boot" to Python (py_engine.boot.handle_request).
// Nothing is fetched from a CDN: Pyodide, micropip and the engine all come from this origin.

import { CODE, NO_WEBGPU_MESSAGE, REQUEST, errorResponse, progress, ready, result } from './protocol.js';
import { installEngine, loadLocalPyodide, loadMicropip } from './pyodide_boot.js';

let pyodide = null;
let booting = null; // the boot promise, so requests that arrive during boot wait for it
let handleRequest = null; // py_engine.boot.handle_request, a PyProxy

async function boot(id) {
  const started = performance.now();
  const step = (stage, message) => self.postMessage(progress(id, stage, message, performance.now() - started));

  if (!('gpu' in navigator)) {
    throw Object.assign(new Error(`navigator.gpu is missing in the worker. ${NO_WEBGPU_MESSAGE}`), { code: CODE.NO_WEBGPU });
  }
  step('runtime', 'loading the Python runtime (Pyodide)');
  pyodide = await loadLocalPyodide({
    stdout: (line) => console.log(`[python] ${line}`),
    stderr: (line) => console.warn(`[python] ${line}`),
  });

  step('micropip', 'loading micropip');
  const micropip = await loadMicropip(pyodide);

  step('engine', 'installing the engine wheel');
  const wheel = await installEngine(pyodide, micropip);
  micropip.destroy();

  step('import', 'importing py_engine');
  // Kept for the worker's lifetime (handle_request is borrowed from the module proxy).
  const bootModule = pyodide.pyimport('py_engine.boot');
  handleRequest = bootModule.handle_request;
  const engineVersion = pyodide.runPython('import py_engine; py_engine.__version__');
  const pythonVersion = pyodide.runPython('import sys; sys.version.split()[0]');

  return {
    pyodideVersion: pyodide.version,
    pythonVersion,
    engineVersion,
    wheel,
    crossOriginIsolated: self.crossOriginIsolated,
    bootMs: Math.round(performance.now() - started),
  };
}

function toPlain(value) {
  if (value && typeof value.toJs === 'function') {
    const plain = value.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false });
    value.destroy();
    return plain;
  }
  return value;
}

// The id goes along so a long request (load, generate) can post progress events for itself from Python.
async function callPython(type, payload, id) {
  if (!booting) throw new Error(`the engine is not booted: send {type: "${REQUEST.BOOT}"} before "${type}"`);
  await booting;
  return toPlain(await handleRequest(type, payload ?? null, id ?? null));
}

self.onmessage = async (event) => {
  const { type, id, payload } = event.data ?? {};
  try {
    if (type === REQUEST.BOOT) {
      booting ??= boot(id);
      self.postMessage(ready(id, await booting));
    } else {
      self.postMessage(result(id, await callPython(type, payload, id)));
    }
  } catch (err) {
    if (type === REQUEST.BOOT) booting = null; // allow a retry after a failed boot
    self.postMessage(errorResponse(id ?? null, err, err?.code ?? null));
  }
};

self.addEventListener('unhandledrejection', (event) => {
  self.postMessage(errorResponse(null, event.reason));
});
