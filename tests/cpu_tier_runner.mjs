// Runs the CPU expert tier (web/cpu_tier/pool.js) on one request folder for tests/unit/test_cpu_tier.py:
//   request.json  {layout, workers, slots, tokens, activation, requests: [{slots, tokens, weights, x_at, mode}]}
//   records.bin   the records of slots 0, 1, ... back to back
//   x.f32         every request's rows of x back to back (request r's from row x_at)
// and writes out.<r>.f32 (the weighted sums, one row per token) and y.<r>.f32 (each job's unweighted output).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createExpertPool } from '../web/cpu_tier/pool.js';

const dir = process.argv[2];
const req = JSON.parse(readFileSync(path.join(dir, 'request.json'), 'utf8'));
const pool = await createExpertPool({ layout: req.layout, workers: req.workers, slots: req.slots,
                                      tokens: req.tokens, jobs: req.jobs, activation: req.activation });
try {
  const records = readFileSync(path.join(dir, 'records.bin'));
  for (let s = 0; s < req.slots; s++) {
    pool.record(s).set(records.subarray(s * pool.recordSize, (s + 1) * pool.recordSize));
  }
  const xs = new Float32Array(new Uint8Array(readFileSync(path.join(dir, 'x.f32'))).buffer);
  for (const [i, r] of req.requests.entries()) {
    const n = Math.max(...r.tokens) + 1;
    const x = xs.subarray(r.x_at * pool.nEmbd, (r.x_at + n) * pool.nEmbd);
    const jobs = { slots: r.slots, tokens: r.tokens, weights: r.weights };
    const out = r.mode === 'async' ? await pool.compute(x, jobs) : pool.computeSync(x, jobs);
    writeFileSync(path.join(dir, `out.${i}.f32`), out);
    const ys = new Float32Array(r.slots.length * pool.nEmbd);
    r.slots.forEach((_, j) => ys.set(pool.expertOutput(j), j * pool.nEmbd));
    writeFileSync(path.join(dir, `y.${i}.f32`), ys);
  }
} finally {
  pool.close();
}
