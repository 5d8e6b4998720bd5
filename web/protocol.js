// Message shapes between the page and the engine worker (imported by both).
//
// Request  (page -> worker): {type, id, payload}
//   "boot" is handled by the worker's JS (Python is not there yet); every other type goes to Python,
//   py_engine.boot.handle_request(type, payload).
// Response (worker -> page): exactly one final response per request id, any number of progress messages before it.
//   {type: "progress", id, stage, message, elapsedMs}
//   {type: "ready",    id, info}            boot finished
//   {type: "result",   id, value}           any other request finished
//   {type: "error",    id, message, errorType, code, stack}
// An error with id null comes from outside any request (an uncaught error in the worker).

export const REQUEST = Object.freeze({ BOOT: 'boot', SELFTEST: 'selftest' });
export const RESPONSE = Object.freeze({ PROGRESS: 'progress', READY: 'ready', RESULT: 'result', ERROR: 'error' });

// Error codes the page reacts to (anything else is shown as a plain error).
export const CODE = Object.freeze({ NO_WEBGPU: 'no-webgpu', WORKER_FAILED: 'worker-failed', DEVICE_LOST: 'device-lost' });

export const NO_WEBGPU_MESSAGE =
  'WebGPU is not available in this browser. Use Chrome/Chromium 113+ (on Linux start it with ' +
  '--enable-unsafe-webgpu, and --enable-features=Vulkan where needed).';

// Python exception classes that mean "this browser offers no usable WebGPU" (py_engine.boot, py_engine.gpu.device).
const NO_WEBGPU_ERRORS = new Set(['WebGPUUnavailable', 'GpuUnavailable']);

export function makeRequest(type, id, payload = {}) {
  return { type, id, payload };
}

export function progress(id, stage, message, elapsedMs) {
  return { type: RESPONSE.PROGRESS, id, stage, message, elapsedMs: Math.round(elapsedMs) };
}

export function ready(id, info) {
  return { type: RESPONSE.READY, id, info };
}

export function result(id, value) {
  return { type: RESPONSE.RESULT, id, value };
}

// The exception's own text: from its "Type: ..." line to the end of the traceback (a message may span lines, e.g.
// WebGPU validation errors, whose last line alone says only where it happened).
function pythonMessage(text, errorType) {
  const lines = text.trim().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const head = lines[i].split(':', 1)[0];
    if (lines[i].includes(':') && (head === errorType || head.endsWith(`.${errorType}`))) return lines.slice(i).join('\n');
  }
  return lines[lines.length - 1];
}

// A Python exception arrives as Pyodide's PythonError: `type` is the exception class name and `message` the whole
// traceback. The readable message is the exception's own text (above); the traceback travels as `stack`.
export function errorResponse(id, err, code = null) {
  const errorType = err?.type ?? err?.name ?? 'Error';
  const text = String(err?.message ?? err);
  const isPython = err?.constructor?.name === 'PythonError' || text.startsWith('Traceback (most recent call last)');
  const message = isPython ? pythonMessage(text, errorType) : text;
  const stack = isPython ? text : String(err?.stack ?? text);
  if (!code && NO_WEBGPU_ERRORS.has(errorType)) code = CODE.NO_WEBGPU;
  if (!code && errorType === 'DeviceLost') code = CODE.DEVICE_LOST; // py_engine.app.errors: the page offers Load again
  return { type: RESPONSE.ERROR, id, message, errorType, code, stack };
}
