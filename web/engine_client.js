// The page's side of the worker protocol: one promise per request, progress through a callback.

import { CODE, RESPONSE, makeRequest } from './protocol.js';

export class EngineError extends Error {
  constructor({ message, errorType, code, stack }) {
    super(message);
    this.name = 'EngineError';
    this.errorType = errorType ?? 'Error'; // the Python exception class for Python errors
    this.code = code ?? null;
    this.workerStack = stack ?? ''; // a Python error's full traceback
  }
}

export class EngineClient {
  #worker;
  #nextId = 1;
  #pending = new Map(); // id -> {resolve, reject, onProgress}

  constructor(workerUrl = '/worker.js') {
    this.#worker = new Worker(workerUrl, { type: 'module' });
    this.#worker.onmessage = (event) => this.#receive(event.data);
    // A module worker that fails to load (a missing file, a syntax error) reports only a bare error event.
    this.#worker.onerror = (event) => {
      event.preventDefault?.();
      const where = event.filename ? ` (${event.filename}:${event.lineno})` : '';
      this.#failAll(new EngineError({
        message: `the engine worker failed: ${event.message || 'worker.js or one of its imports did not load'}${where}`,
        code: CODE.WORKER_FAILED,
      }));
    };
  }

  request(type, payload = {}, onProgress = null) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onProgress });
      this.#worker.postMessage(makeRequest(type, id, payload));
    });
  }

  #receive(msg) {
    const waiting = this.#pending.get(msg?.id);
    if (!waiting) {
      if (msg?.type === RESPONSE.ERROR) this.#failAll(new EngineError(msg));
      return;
    }
    switch (msg.type) {
      case RESPONSE.PROGRESS:
        waiting.onProgress?.(msg);
        return;
      case RESPONSE.READY:
        this.#pending.delete(msg.id);
        waiting.resolve(msg.info);
        return;
      case RESPONSE.RESULT:
        this.#pending.delete(msg.id);
        waiting.resolve(msg.value);
        return;
      case RESPONSE.ERROR:
        this.#pending.delete(msg.id);
        waiting.reject(new EngineError(msg));
        return;
      default:
        console.warn('engine worker sent an unknown message', msg);
    }
  }

  #failAll(error) {
    for (const { reject } of this.#pending.values()) reject(error);
    this.#pending.clear();
    this.onFatal?.(error);
  }
}
