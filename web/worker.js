// The engine worker (a module worker): boots Pyodide from the local server, installs the engine wheel with
// micropip and hands every request after "boot" to Python (py_engine.boot.handle_request).
// Nothing is fetched from a CDN: Pyodide, micropip and the engine all come from this origin.

import { CODE, NO_WEBGPU_MESSAGE, REQUEST, errorResponse, progress, ready, result } from './protocol.js';

const ORIGIN_URL = self.location.href;
const PYODIDE_URL = new URL('/pyodide/', ORIGIN_URL).href;
const ENGINE_API_URL = new URL('/api/engine', ORIGIN_URL).href;
const WHEEL_DIR = '/wheels'; // in Pyodide's in-memory file system

let pyodide = null;
let booting = null; // the boot promise, so requests that arrive during boot wait for it
let handleRequest = null; // py_engine.boot.handle_request, a PyProxy

async function fetchOk(url, init) {
  const response = await fetch(url, init);
  if (!response.ok) throw new Error(`GET ${url} failed: HTTP ${response.status} ${response.statusText}`);
  return response;
}

async function sha256Hex(bytes) {
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

// Fetch the engine wheel ourselves (revalidating, so an edited source is picked up on reload), drop it into
// Pyodide's file system and let micropip install it from there.
async function installEngine(micropip) {
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

async function boot(id) {
  const started = performance.now();
  const step = (stage, message) => self.postMessage(progress(id, stage, message, performance.now() - started));

  if (!('gpu' in navigator)) {
    throw Object.assign(new Error(`navigator.gpu is missing in the worker. ${NO_WEBGPU_MESSAGE}`), { code: CODE.NO_WEBGPU });
  }
  step('runtime', 'loading the Python runtime (Pyodide)');
  const lockFileContents = await patchedLockFile();
  const { loadPyodide } = await import(new URL('pyodide.mjs', PYODIDE_URL).href);
  pyodide = await loadPyodide({
    indexURL: PYODIDE_URL,
    packageBaseUrl: PYODIDE_URL,
    lockFileContents,
    stdout: (line) => console.log(`[python] ${line}`),
    stderr: (line) => console.warn(`[python] ${line}`),
  });

  step('micropip', 'loading micropip');
  await pyodide.loadPackage('micropip', { messageCallback: () => {} });
  const micropip = pyodide.pyimport('micropip');

  step('engine', 'installing the engine wheel');
  const wheel = await installEngine(micropip);
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
