// Throughput of the CPU expert tier (web/cpu_tier) on real-dimension Q8_0 expert records (random bytes: the
// kernel's speed does not depend on the values), for 1..N workers.
//   node lab/cpu_tier_bench.mjs [--workers N] [--embd 2048] [--ff 512] [--k 8] [--tokens 1] [--seconds 2]
//                               [--shared] [--records N] [--wasm other.wasm] [--q4]
// --q4: Q4_0 records with GEGLU, gemma4's experts (Gemma 4 26B-A4B: --embd 2816 --ff 704);
// --shared: every token of a request uses the same k experts (a prefill chunk's union at its most reused);
// --records: how many records rotate (default: 256 MiB of them); --wasm: a kernel build to compare.
// Prints, per worker count: requests of k experts (for --tokens tokens each), GB/s of expert weights (counted once
// per job: with --shared, the rate the jobs see) and experts/s (jobs/s). Records rotate through a set larger than the CPU caches, as misses read from the store would.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { createExpertPool } from '../web/cpu_tier/pool.js';

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}
const maxWorkers = arg('workers', os.availableParallelism());
const nEmbd = arg('embd', 2048), nFf = arg('ff', 512), k = arg('k', 8), tokens = arg('tokens', 1);
const seconds = arg('seconds', 2);
const shared = process.argv.includes('--shared');
const wasmAt = process.argv.indexOf('--wasm');
const wasm = wasmAt > 0 ? readFileSync(process.argv[wasmAt + 1]) : undefined;
const q4 = process.argv.includes('--q4');

// the store's record layout (py_engine/store/layout.py): gate codes, up codes, gate scales, up scales, down codes,
// down scales, each 256-byte aligned
const al = (n) => Math.ceil(n / 256) * 256;
const codes = q4 ? nEmbd * nFf / 2 : nEmbd * nFf, scales = (nEmbd * nFf / 32) * 2;
const planes = {};
let off = 0;
for (const [name, n] of [['gate_codes', codes], ['up_codes', codes], ['gate_scales', scales],
                         ['up_scales', scales], ['down_codes', codes], ['down_scales', scales]]) {
  planes[name] = [off, n];
  off = al(off + n);
}
const type = q4 ? 2 : 8;
const layout = { types: { gate: type, up: type, down: type }, dims: { gate: [nEmbd, nFf], up: [nEmbd, nFf], down: [nFf, nEmbd] },
                 planes, record_size: off };
const jobsPerRequest = k * tokens;
const slots = Math.max(jobsPerRequest, arg('records', Math.ceil((256 << 20) / off)));  // default: > 256 MiB

function fillRecord(bytes, seed) {
  let s = seed * 2654435761 >>> 0;
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  for (let i = 0; i < words.length; i++) { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; words[i] = s >>> 0; }
  // f16 scales around 2^-10, positive: finite values like a real model's
  for (const name of ['gate_scales', 'up_scales', 'down_scales']) {
    const [o, n] = planes[name];
    const h = new Uint16Array(bytes.buffer, bytes.byteOffset + o, n / 2);
    for (let i = 0; i < h.length; i++) h[i] = 0x1400 + (h[i] & 0x3ff);
  }
}

console.log(`CPU expert tier: n_embd ${nEmbd}, n_ff ${nFf}, ${q4 ? 'Q4_0' : 'Q8_0'} record ${off} B, ${k} experts x ${tokens} token(s) ` +
            `per request${shared ? ' (the same k for every token)' : ''}, ${slots} records (${(slots * off / 2 ** 20).toFixed(0)} MiB) in rotation, ` +
            `${os.availableParallelism()} cores`);
// GB/s/core: bytes per second of CPU time the process used (the caller sleeps in Atomics.wait meanwhile): one
// core's rate, a figure that holds on a machine whose cores are busy with other work, unlike the wall-clock one
console.log('workers  requests/s  ms/request  GB/s  experts/s  GB/s/core');
for (let w = 1; w <= maxWorkers; w++) {
  const pool = await createExpertPool({ layout, wasm, workers: w, slots, tokens, jobs: jobsPerRequest,
                                        activation: q4 ? 'geglu' : 'swiglu' });
  for (let s = 0; s < slots; s++) fillRecord(pool.record(s), s + 1);
  const x = new Float32Array(tokens * nEmbd).map((_, i) => Math.sin(i * 0.37) * 1.3);
  const tok = Array.from({ length: jobsPerRequest }, (_, j) => Math.floor(j / k));
  const weights = new Array(jobsPerRequest).fill(1 / k);
  let next = 0;
  const request = () => {
    const sl = Array.from({ length: jobsPerRequest }, () => { const s = next; next = (next + 1) % slots; return s; });
    if (shared) for (let j = k; j < jobsPerRequest; j++) sl[j] = sl[j % k];
    pool.computeSync(x, { slots: sl, tokens: tok, weights });
  };
  for (let i = 0; i < 3; i++) request();  // warm: tier-up of the wasm code, the workers' first wake-ups
  let n = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) { request(); n++; }
  const ms = (performance.now() - t0) / n;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000 / n;
  const gbs = (jobsPerRequest * off) / (ms * 1e6);
  const cpuGbs = (jobsPerRequest * off) / (cpuMs * 1e6);
  console.log(`${String(w).padStart(7)}  ${(1000 / ms).toFixed(1).padStart(10)}  ${ms.toFixed(3).padStart(10)}  ` +
              `${gbs.toFixed(2).padStart(4)}  ${(jobsPerRequest * 1000 / ms).toFixed(0).padStart(9)}  ` +
              `${cpuGbs.toFixed(2).padStart(9)}`);
  pool.close();
}
