// The CPU expert tier: a pool of workers (Web Workers in the browser, worker_threads in Node) computing routed
// experts' FFNs — gate, up, SwiGLU (or GEGLU), down — on the CPU with a WebAssembly SIMD kernel (expert_ffn.wat),
// for an expert missed by the GPU pool that is cheaper to compute where it lies than to upload.
//
//   const pool = await createExpertPool({ layout, workers: 4, slots: 16, tokens: 1 });
//   pool.record(slot).set(bytes);          // or read the record straight into that view
//   const out = pool.computeSync(x, { slots, tokens, weights });   // blocking (workers and Node only)
//   const out = await pool.compute(x, { slots, tokens, weights });
//
// layout is the store manifest's expert layout (py_engine/store/layout.py ExpertLayout.to_json): record planes,
// part types (F32, Q8_0 or Q4_0) and dims. x holds n_tokens rows of n_embd f32; job j multiplies the record in
// slots[j] with row tokens[j] of x. The result is out[t] = Σ_{j: tokens[j] = t} weights[j] · FFN_j(x[t]), one
// row of n_embd per token (weights default to 1); expertOutput(j) is job j's FFN output before weighting;
// measure() times the tier on this machine.
// The rows of every product are split across the workers; they meet at one barrier between the gate/up and the
// down products. All of it lives in one shared WebAssembly memory (records, inputs, outputs, the workers' scratch).
import { CTRL, CMD_RUN, CMD_EXIT, planMemory } from './plan.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node;
const here = (name) => new URL(name, import.meta.url);

async function loadKernel(wasm) {
  if (wasm instanceof WebAssembly.Module) return wasm;
  let bytes = wasm;
  if (!bytes) {
    if (isNode) {
      const { readFile } = await import('node:fs/promises');
      bytes = await readFile(here('expert_ffn.wasm'));
    } else {
      const res = await fetch(here('expert_ffn.wasm'));
      if (!res.ok) throw new Error(`could not load the CPU expert kernel (expert_ffn.wasm): HTTP ${res.status}`);
      bytes = await res.arrayBuffer();
    }
  }
  return WebAssembly.compile(bytes);
}

// A worker handle: post, listen (messages), failed (the script could not load or threw at top level), hold (Node:
// keep the process alive while a request is in flight: Atomics.waitAsync alone does not), end.
async function spawn(url) {
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(url, { execArgv: [] });  // none of the parent's flags (--input-type breaks a worker file)
    w.unref();  // an idle pool does not keep Node running
    return { post: (m) => w.postMessage(m), listen: (fn) => w.on('message', fn), failed: (fn) => w.on('error', fn),
             hold: (on) => (on ? w.ref() : w.unref()), end: () => w.terminate() };
  }
  const w = new Worker(url, { type: 'module' });
  return { post: (m) => w.postMessage(m), listen: (fn) => { w.onmessage = (ev) => fn(ev.data); },
           failed: (fn) => { w.onerror = (ev) => fn(new Error(ev.message || `could not start ${url}`)); },
           hold: () => {}, end: () => w.terminate() };
}

class ExpertPool {
  constructor(plan, memory, workers) {
    this.plan = plan;
    this.memory = memory;
    this.workers = workers;
    this.ctrl = new Int32Array(memory.buffer, plan.ctrl, 16);
    this.i32 = new Int32Array(memory.buffer);
    this.f32 = new Float32Array(memory.buffer);
    this.busy = false;
    this.closed = false;
  }

  get nEmbd() { return this.plan.nEmbd; }
  get nFf() { return this.plan.nFf; }
  get recordSize() { return this.plan.recordSize; }
  get slots() { return this.plan.slots; }

  // The shared-memory bytes of record slot i: write (or read from the store straight into) it.
  record(i) {
    if (!(i >= 0 && i < this.plan.slots)) throw new Error(`record slot ${i} is outside the pool's ${this.plan.slots}`);
    return new Uint8Array(this.memory.buffer, this.plan.records + i * this.plan.recordSize, this.plan.recordSize);
  }

  _start(x, { slots, tokens, weights } = {}) {
    const p = this.plan;
    if (this.closed) throw new Error('the CPU expert pool is closed');
    if (this.busy) throw new Error('the CPU expert pool is already computing; wait for that request first');
    const nTokens = x.length / p.nEmbd;
    if (!Number.isInteger(nTokens) || nTokens < 1 || nTokens > p.tokens) {
      throw new Error(`x holds ${x.length} values: expected 1 to ${p.tokens} rows of ${p.nEmbd}`);
    }
    const nJobs = slots.length;
    if (nJobs < 1 || nJobs > p.jobs) throw new Error(`${nJobs} experts asked for; the pool takes 1 to ${p.jobs}`);
    for (let j = 0; j < nJobs; j++) {
      const s = slots[j], t = tokens ? tokens[j] : 0;
      if (!(s >= 0 && s < p.slots)) throw new Error(`job ${j} reads record slot ${s}, outside the pool's ${p.slots}`);
      if (!(t >= 0 && t < nTokens)) throw new Error(`job ${j} is for token ${t}, but x holds ${nTokens}`);
      this.i32[p.jobSlot / 4 + j] = s;
      this.i32[p.jobToken / 4 + j] = t;
      this.f32[p.jobWeight / 4 + j] = weights ? weights[j] : 1;
    }
    this.f32.set(x, p.x / 4);
    const c = this.ctrl;
    Atomics.store(c, CTRL.N_JOBS, nJobs);
    Atomics.store(c, CTRL.N_TOKENS, nTokens);
    Atomics.store(c, CTRL.CMD, CMD_RUN);
    Atomics.store(c, CTRL.DONE, 0);
    Atomics.store(c, CTRL.FAILED, 0);
    Atomics.store(c, CTRL.ERROR_LEN, 0);
    this.busy = true;
    for (const w of this.workers) w.hold(true);
    this.nJobs = nJobs;
    this.nTokens = nTokens;
    Atomics.add(c, CTRL.GEN, 1);
    Atomics.notify(c, CTRL.GEN);
  }

  _finish() {
    this.busy = false;
    for (const w of this.workers) w.hold(false);
    if (Atomics.load(this.ctrl, CTRL.FAILED)) {
      const n = Atomics.load(this.ctrl, CTRL.ERROR_LEN);
      const why = new TextDecoder().decode(new Uint8Array(this.memory.buffer, this.plan.errorText, n).slice());
      throw new Error(`the CPU expert tier failed: ${why}`);
    }
    const n = this.nTokens * this.plan.nEmbd;
    return this.f32.slice(this.plan.out / 4, this.plan.out / 4 + n);
  }

  // Blocks the calling thread until the workers are done (Atomics.wait: Node, or a worker in the browser).
  computeSync(x, jobs) {
    this._start(x, jobs);
    const c = this.ctrl, n = this.plan.workers;
    for (let done; (done = Atomics.load(c, CTRL.DONE)) < n;) Atomics.wait(c, CTRL.DONE, done);
    return this._finish();
  }

  async compute(x, jobs) {
    this._start(x, jobs);
    const c = this.ctrl, n = this.plan.workers;
    for (let done; (done = Atomics.load(c, CTRL.DONE)) < n;) {
      const wait = Atomics.waitAsync(c, CTRL.DONE, done);
      if (wait.async) await wait.value;
    }
    return this._finish();
  }

  // Job j's FFN output of the last request, before weighting (a copy).
  expertOutput(j) {
    if (!(j >= 0 && j < this.nJobs)) throw new Error(`the last request had ${this.nJobs} jobs, not job ${j}`);
    const at = this.plan.y / 4 + j * this.plan.nEmbd;
    return this.f32.slice(at, at + this.plan.nEmbd);
  }

  // The tier's rate on this machine, for deciding per miss whether to compute on the CPU or upload: `repeats`
  // requests of `jobs` experts (one token) on records slots 0 .. jobs-1 as they stand (the kernel's time does not
  // depend on the values: zeros do). Returns {ms: per request, bytesPerS: record bytes per second, expertsPerS}.
  async measure({ jobs = Math.min(8, this.plan.slots, this.plan.jobs), repeats = 5 } = {}) {
    const x = new Float32Array(this.plan.nEmbd).map((_, i) => Math.sin(i));
    const request = { slots: Array.from({ length: jobs }, (_, j) => j) };
    await this.compute(x, request);  // the first request tiers the code up and wakes the workers
    const t0 = performance.now();
    for (let i = 0; i < repeats; i++) await this.compute(x, request);
    const ms = (performance.now() - t0) / repeats;
    return { ms, bytesPerS: (jobs * this.plan.recordSize * 1000) / ms, expertsPerS: (jobs * 1000) / ms };
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.ctrl, CTRL.CMD, CMD_EXIT);
    Atomics.add(this.ctrl, CTRL.GEN, 1);
    Atomics.notify(this.ctrl, CTRL.GEN);
    for (const w of this.workers) w.end();
  }
}

// options: layout (required); workers (default: the cores less one, at least 1); slots (records held, default 8);
// tokens (rows of x per request, default 1); jobs (experts per request, default slots); activation ('swiglu', the
// default, or 'geglu': gelu(gate)·up, gemma4's experts); wasm (bytes or a compiled module; default: expert_ffn.wasm
// beside this file); workerUrl (default: expert_worker.js beside this file).
export async function createExpertPool(options) {
  const cores = (isNode ? (await import('node:os')).availableParallelism() : navigator.hardwareConcurrency) || 2;
  const workers = options.workers ?? Math.max(1, cores - 1);
  const slots = options.slots ?? 8;
  const caps = { workers, slots, tokens: options.tokens ?? 1, jobs: options.jobs ?? slots,
                 activation: options.activation ?? 'swiglu' };
  const plan = planMemory(options.layout, caps);
  const module = await loadKernel(options.wasm);
  let memory;
  try {
    memory = new WebAssembly.Memory({ initial: plan.pages, maximum: plan.pages, shared: true });
  } catch (err) {
    throw new Error(`the CPU expert tier could not get ${(plan.bytes / 2 ** 20).toFixed(0)} MiB of shared memory ` +
                    `(${err.message}); give it fewer record slots, or serve the page cross-origin isolated`);
  }
  const url = options.workerUrl ?? here('expert_worker.js');
  const handles = await Promise.all(Array.from({ length: workers }, () => spawn(url)));
  const pool = new ExpertPool(plan, memory, handles);
  await Promise.all(handles.map((h, index) => new Promise((resolve, reject) => {
    h.listen((m) => {
      if (m.type === 'ready') resolve();
      else if (m.type === 'error') reject(new Error(`CPU expert worker ${m.index} failed: ${m.error}`));
    });
    h.failed((err) => reject(new Error(`CPU expert worker ${index} could not start: ${err?.message ?? err}`)));
    h.post({ module, memory, plan, index });
  }))).catch((err) => { pool.close(); throw err; });
  return pool;
}
