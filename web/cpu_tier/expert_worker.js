// One worker of the CPU expert tier (pool.js): instantiates expert_ffn.wasm on the pool's shared memory, then waits
// for requests on the control words and computes its share of the rows. Runs as a Web Worker (module) in the
// browser and as a worker_threads worker in Node.
import { CTRL, CMD_EXIT, ERROR_TEXT_BYTES, GGML_Q8_0 } from './plan.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node;

function share(total, index, parts) {
  return [Math.floor((total * index) / parts), Math.floor((total * (index + 1)) / parts)];
}

class ExpertWorker {
  constructor({ module, memory, plan, index }) {
    this.plan = plan;
    this.index = index;
    this.k = new WebAssembly.Instance(module, { env: { memory, exp: Math.exp } }).exports;
    this.ctrl = new Int32Array(memory.buffer, plan.ctrl, 16);
    this.i32 = new Int32Array(memory.buffer);
    this.f32 = new Float32Array(memory.buffer);
    this.mine = plan.scratch[index];
  }

  // The product of rows [r0, r1) of one part of the record at `rec` with the input of that part.
  rows(part, rec, r0, r1, input, out) {
    const { planes, types } = this.plan;
    const codes = rec + planes[`${part}_codes`].off;
    if (types[part] === GGML_Q8_0) {
      const nb = (part === 'down' ? this.plan.nFf : this.plan.nEmbd) / 32;
      this.k.rows_q8(codes, rec + planes[`${part}_scales`].off, nb, r0, r1, input.q, input.s, out);
    } else {
      this.k.rows_f32(codes, part === 'down' ? this.plan.nFf : this.plan.nEmbd, r0, r1, input.f, out);
    }
  }

  // gate, up and silu(gate)·up for this worker's share of all jobs' rows (job-major).
  gateUp(nJobs, nTokens) {
    const p = this.plan;
    const anyQ8 = p.types.gate === GGML_Q8_0 || p.types.up === GGML_Q8_0;
    if (anyQ8) this.k.quantize_q8(p.x, nTokens * p.nEmbd, this.mine.xq, this.mine.xs);
    const [u0, u1] = share(nJobs * p.nFf, this.index, p.workers);
    for (let j = Math.floor(u0 / p.nFf); j < nJobs && j * p.nFf < u1; j++) {
      const r0 = Math.max(u0 - j * p.nFf, 0);
      const r1 = Math.min(u1 - j * p.nFf, p.nFf);
      const t = this.i32[p.jobToken / 4 + j];
      const rec = p.records + this.i32[p.jobSlot / 4 + j] * p.recordSize;
      const input = { q: this.mine.xq + 2 * t * p.nEmbd, s: this.mine.xs + 4 * t * (p.nEmbd / 32),
                      f: p.x + 4 * t * p.nEmbd };
      const at = 4 * j * p.nFf;
      this.rows('gate', rec, r0, r1, input, p.gate + at);
      this.rows('up', rec, r0, r1, input, p.up + at);
      this.k.swiglu(p.gate + at + 4 * r0, p.up + at + 4 * r0, p.act + at + 4 * r0, r1 - r0);
    }
  }

  // down products for this worker's share of the output rows, every job, and their weighted sums per token.
  down(nJobs, nTokens) {
    const p = this.plan;
    const q8 = p.types.down === GGML_Q8_0;
    if (q8) this.k.quantize_q8(p.act, nJobs * p.nFf, this.mine.aq, this.mine.as);
    const [r0, r1] = share(p.nEmbd, this.index, p.workers);
    const f = this.f32;
    for (let t = 0; t < nTokens; t++) f.fill(0, p.out / 4 + t * p.nEmbd + r0, p.out / 4 + t * p.nEmbd + r1);
    for (let j = 0; j < nJobs; j++) {
      const rec = p.records + this.i32[p.jobSlot / 4 + j] * p.recordSize;
      const input = { q: this.mine.aq + 2 * j * p.nFf, s: this.mine.as + 4 * j * (p.nFf / 32),
                      f: p.act + 4 * j * p.nFf };
      this.rows('down', rec, r0, r1, input, p.y + 4 * j * p.nEmbd);
      const w = f[p.jobWeight / 4 + j];
      const y = p.y / 4 + j * p.nEmbd;
      const out = p.out / 4 + this.i32[p.jobToken / 4 + j] * p.nEmbd;
      for (let r = r0; r < r1; r++) f[out + r] += w * f[y + r];
    }
  }

  barrier() {
    const c = this.ctrl;
    const gen = Atomics.load(c, CTRL.BAR_GEN);
    if (Atomics.add(c, CTRL.BAR_COUNT, 1) === this.plan.workers - 1) {
      Atomics.store(c, CTRL.BAR_COUNT, 0);
      Atomics.add(c, CTRL.BAR_GEN, 1);
      Atomics.notify(c, CTRL.BAR_GEN);
    } else {
      while (Atomics.load(c, CTRL.BAR_GEN) === gen) Atomics.wait(c, CTRL.BAR_GEN, gen);
    }
  }

  // The first failure of a request leaves its message where a caller blocked in Atomics.wait can read it.
  fail(err) {
    if (Atomics.compareExchange(this.ctrl, CTRL.FAILED, 0, 1) !== 0) return;
    const text = new TextEncoder().encode(`worker ${this.index}: ${err?.name ?? 'Error'}: ${err?.message ?? err}`);
    const n = Math.min(text.length, ERROR_TEXT_BYTES);
    new Uint8Array(this.f32.buffer, this.plan.errorText, n).set(text.subarray(0, n));
    Atomics.store(this.ctrl, CTRL.ERROR_LEN, n);
  }

  finish() {
    if (Atomics.add(this.ctrl, CTRL.DONE, 1) === this.plan.workers - 1) Atomics.notify(this.ctrl, CTRL.DONE);
  }

  // Serve requests until told to exit. A failed request still reaches the barrier and DONE, so that the other
  // workers and the caller never wait for it.
  serve(report) {
    const c = this.ctrl;
    let seen = 0;  // the pool makes no request before every worker is ready: GEN is still 0 here
    for (;;) {
      Atomics.wait(c, CTRL.GEN, seen);
      const gen = Atomics.load(c, CTRL.GEN);
      if (gen === seen) continue;
      seen = gen;
      if (Atomics.load(c, CTRL.CMD) === CMD_EXIT) return;
      const nJobs = Atomics.load(c, CTRL.N_JOBS);
      const nTokens = Atomics.load(c, CTRL.N_TOKENS);
      let failed = false;
      try {
        this.gateUp(nJobs, nTokens);
      } catch (err) {
        failed = true;
        this.fail(err);
        report(err);
      }
      this.barrier();
      try {
        if (!failed) this.down(nJobs, nTokens);
      } catch (err) {
        this.fail(err);
        report(err);
      }
      this.finish();
    }
  }
}

function start(msg, post) {
  const report = (err) => post({ type: 'error', index: msg.index, error: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
  let worker;
  try {
    worker = new ExpertWorker(msg);
  } catch (err) {
    report(err);
    return;
  }
  post({ type: 'ready', index: msg.index });
  worker.serve(report);
  post({ type: 'exited', index: msg.index });
}

if (isNode) {
  const { parentPort } = await import('node:worker_threads');
  parentPort.once('message', (msg) => start(msg, (m) => parentPort.postMessage(m)));
} else {
  self.onmessage = (ev) => start(ev.data, (m) => self.postMessage(m));
}
