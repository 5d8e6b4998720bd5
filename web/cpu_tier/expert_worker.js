// One worker of the CPU expert tier (pool.js): instantiates expert_ffn.wasm on the pool's shared memory, then waits
// for requests on the control words and computes its share of the rows. Runs as a Web Worker (module) in the
// browser and as a worker_threads worker in Node.
import { CTRL, CMD_EXIT, ERROR_TEXT_BYTES, GGML_Q4_0, quantisedInput } from './plan.js';

const CHUNK_ROWS = 16;  // rows of a record multiplied by every job of that record before the next rows (~32 KB)
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
    if (quantisedInput(types[part])) {
      const nb = (part === 'down' ? this.plan.nFf : this.plan.nEmbd) / 32;
      const rowsOf = types[part] === GGML_Q4_0 ? this.k.rows_q4 : this.k.rows_q8;
      rowsOf(codes, rec + planes[`${part}_scales`].off, nb, r0, r1, input.q, input.s, out);
    } else {
      this.k.rows_f32(codes, part === 'down' ? this.plan.nFf : this.plan.nEmbd, r0, r1, input.f, out);
    }
  }

  // The request's jobs grouped by record slot, in order of first use: the jobs of a group (tokens of a prefill chunk
  // that chose the same expert) read its rows while they are still in cache (CHUNK_ROWS at a time), so a record is
  // read from memory once per request, not once per token.
  groups(nJobs) {
    const p = this.plan;
    const bySlot = new Map();
    for (let j = 0; j < nJobs; j++) {
      const slot = this.i32[p.jobSlot / 4 + j];
      if (!bySlot.has(slot)) bySlot.set(slot, []);
      bySlot.get(slot).push(j);
    }
    return [...bySlot].map(([slot, jobs]) => ({ rec: p.records + slot * p.recordSize, jobs }));
  }

  // gate, up and silu(gate)·up (gelu(gate)·up) for this worker's share of the rows of every record used (record-major).
  gateUp(groups, nTokens) {
    const p = this.plan;
    const anyQ8 = quantisedInput(p.types.gate) || quantisedInput(p.types.up);
    if (anyQ8) this.k.quantize_q8(p.x, nTokens * p.nEmbd, this.mine.xq, this.mine.xs);
    const [u0, u1] = share(groups.length * p.nFf, this.index, p.workers);
    for (let g = Math.floor(u0 / p.nFf); g < groups.length && g * p.nFf < u1; g++) {
      const { rec, jobs } = groups[g];
      const r0 = Math.max(u0 - g * p.nFf, 0);
      const r1 = Math.min(u1 - g * p.nFf, p.nFf);
      const inputs = jobs.map((j) => {
        const t = this.i32[p.jobToken / 4 + j];
        return { q: this.mine.xq + 2 * t * p.nEmbd, s: this.mine.xs + 4 * t * (p.nEmbd / 32),
                 f: p.x + 4 * t * p.nEmbd, at: 4 * j * p.nFf };
      });
      for (let c0 = r0; c0 < r1; c0 += CHUNK_ROWS) {
        const c1 = Math.min(c0 + CHUNK_ROWS, r1);
        for (const input of inputs) this.rows('gate', rec, c0, c1, input, p.gate + input.at);
        for (const input of inputs) this.rows('up', rec, c0, c1, input, p.up + input.at);
      }
      const act = p.activation === 'geglu' ? this.k.geglu : this.k.swiglu;
      for (const { at } of inputs) act(p.gate + at + 4 * r0, p.up + at + 4 * r0, p.act + at + 4 * r0, r1 - r0);
    }
  }

  // down products for this worker's share of the output rows, every job, and their weighted sums per token.
  down(groups, nJobs, nTokens) {
    const p = this.plan;
    const q8 = quantisedInput(p.types.down);
    if (q8) this.k.quantize_q8(p.act, nJobs * p.nFf, this.mine.aq, this.mine.as);
    const [r0, r1] = share(p.nEmbd, this.index, p.workers);
    for (const { rec, jobs } of groups) {
      const inputs = jobs.map((j) => ({ q: this.mine.aq + 2 * j * p.nFf, s: this.mine.as + 4 * j * (p.nFf / 32),
                                        f: p.act + 4 * j * p.nFf, y: p.y + 4 * j * p.nEmbd }));
      for (let c0 = r0; c0 < r1; c0 += CHUNK_ROWS) {
        const c1 = Math.min(c0 + CHUNK_ROWS, r1);
        for (const input of inputs) this.rows('down', rec, c0, c1, input, input.y);
      }
    }
    const f = this.f32;
    for (let t = 0; t < nTokens; t++) f.fill(0, p.out / 4 + t * p.nEmbd + r0, p.out / 4 + t * p.nEmbd + r1);
    for (let j = 0; j < nJobs; j++) {
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
      let groups;
      try {
        groups = this.groups(nJobs);
        this.gateUp(groups, nTokens);
      } catch (err) {
        failed = true;
        this.fail(err);
        report(err);
      }
      this.barrier();
      try {
        if (!failed) this.down(groups, nJobs, nTokens);
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
