import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// What the kernel benchmarks here share: Dawn's device, a seeded generator, an f16 decoder, the engine's shaders
// assembled, and for one device the upload, the timing of R back-to-back dispatches in one pass (median over repeats:
// timestamp queries where the device has them, else the wall clock per submit), the readback of an f32 buffer and a
// pipeline with its bind group.
// Needs Dawn's globals (GPUBufferUsage, ...: dawnDevice sets them).
const SHADERS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shaders');

// Every shader under shaders/ by its file name (unique across the subfolders), as py_engine/gpu/shader_loader.py
// finds them.
const SHADER_PATHS = new Map(readdirSync(SHADERS, { recursive: true }).filter((p) => p.endsWith('.wgsl'))
  .map((p) => [p.split(/[\\/]/).pop(), join(SHADERS, p)]));

// A shader of shaders/ with its #include "x.wgsl" inserted (once each) and {{NAME}} placeholders filled, as
// py_engine/gpu/shader_loader.py does.
export function assemble(name, consts, seen = new Set()) {
  seen.add(name);
  if (!SHADER_PATHS.has(name)) throw new Error(`shader ${name} not found under ${SHADERS}`);
  const text = readFileSync(SHADER_PATHS.get(name), 'utf8').replace(/\{\{([A-Z][A-Z0-9_]*)\}\}/g, (_, k) => {
    if (!(k in consts)) throw new Error(`${name}: no value given for {{${k}}}`);
    return String(consts[k]);
  });
  return text.replace(/^[ \t]*#include[ \t]+"([^"]+)"[ \t]*$/gm, (_, inc) =>
    seen.has(inc) ? `// ${inc} already included` : assemble(inc, consts, seen));
}

// Dawn's Node binding (DAWN_NODE, else the `webgpu` package) with its globals set (GPUBufferUsage, ...), and a device
// with timestamp queries where the adapter has them (Dawn's 65.5 µs rounding of them off), those of `features`
// (names) the adapter has, and the adapter's own values of `limits` (names); a validation error ends the process
// rather than letting a benchmark time nothing.
let instance = null;   // Dawn's instance must outlive its devices (collected, the process crashes)

export async function dawnDevice(limits = [], features = []) {
  const dawn = createRequire(import.meta.url)(process.env.DAWN_NODE || 'webgpu');
  Object.assign(globalThis, dawn.globals);
  instance = dawn.create(['disable-dawn-features=timestamp_quantization']);
  const adapter = await instance.requestAdapter();
  const hasTs = adapter.features.has('timestamp-query');
  const wanted = [...(hasTs ? ['timestamp-query'] : []), ...features.filter((f) => adapter.features.has(f))];
  const device = await adapter.requestDevice({ requiredFeatures: wanted,
    requiredLimits: Object.fromEntries(limits.map((name) => [name, adapter.limits[name]])) });
  device.addEventListener('uncapturederror', (ev) => { console.error(ev.error.message); process.exit(1); });
  return { adapter, device, hasTs };
}

// The engine's launch of a matvec-layout product of `rows` rows of nb blocks on a GPU adapter (py_engine/gpu/kernels.py
// matvec_lanes, matvec_rows_per_group): lanes per row, rows per lane group (at most maxRows), workgroups.
export function matvecLaunch(rows, nb, maxRows = 4) {
  let lanes = 1;
  while (lanes * 2 <= Math.min(nb, 16)) lanes *= 2;
  while (lanes * 2 <= Math.min(nb, 64) && (rows * lanes) / 64 < 264) lanes *= 2;
  const per = Math.min(maxRows, (rows * lanes) / 64 / 4 >= 256 ? 4 : 1);
  return { lanes, per, groups: Math.ceil(rows / ((64 / lanes) * per)) };
}

export const med = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];

export function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

export const f16 = (h) => {
  const e = (h >> 10) & 31, f = h & 1023;
  return (e ? (1 + f / 1024) * 2 ** (e - 15) : f / 1024 * 2 ** -14) * (h & 0x8000 ? -1 : 1);
};

// A barrier across all the workgroups of one dispatch (grid_barrier.mjs, persistent_chain.mjs): lane 0 of each adds
// one to counters[0], then waits until `arrivals` have; a wait that spins past spinCap counts a timeout in
// counters[2], after which no wait of the dispatch waits any more (a grid the GPU cannot hold at once ends rather
// than hangs). The includer declares counters: array<atomic<u32>, 4>; every lane must call it (barriers).
export const gridBarrierWgsl = (spinCap) => `
fn grid_barrier(t: u32, arrivals: u32) {
  storageBarrier();
  workgroupBarrier();
  if (t == 0u) {
    atomicAdd(&counters[0], 1u);
    var n = 0u;
    loop {
      if (atomicLoad(&counters[0]) >= arrivals || atomicLoad(&counters[2]) != 0u) {
        break;
      }
      n++;
      if (n >= ${spinCap}u) {
        atomicAdd(&counters[2], 1u);
        break;
      }
    }
  }
  workgroupBarrier();
  storageBarrier();
}`;

export function gpuTools(device, hasTs) {
  const CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC, MR = GPUBufferUsage.MAP_READ;

  function mkbuf(arr, usage = GPUBufferUsage.STORAGE | CD) {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(arr.byteLength / 16) * 16), usage });
    for (let o = 0; o < arr.byteLength; o += 64 << 20)
      device.queue.writeBuffer(b, o, arr.buffer, arr.byteOffset + o, Math.min(64 << 20, arr.byteLength - o));
    return b;
  }

  // `buffers` and n - 1 copies of them made on the GPU: [buffers, copy 1, ...] (a matrix read cold: each dispatch
  // reads the next copy, more bytes in all than the L2 cache holds); `buffers` need COPY_SRC
  function gpuCopies(buffers, n) {
    const out = [buffers];
    const e = device.createCommandEncoder();
    for (let c = 1; c < n; c++) {
      const copy = buffers.map((b) => device.createBuffer({ size: b.size, usage: GPUBufferUsage.STORAGE | CD }));
      copy.forEach((b, i) => e.copyBufferToBuffer(buffers[i], 0, b, 0, b.size));
      out.push(copy);
    }
    device.queue.submit([e.finish()]);
    return out;
  }

  // µs of one compute pass that record(pass) fills: timestamps where the device has them, else the wall clock to
  // the submit's completion; extra(encoder), where given, records commands after the pass (copies to read back)
  let tq = null, tres = null, trb = null;
  async function passUs(record, extra = null) {
    if (hasTs && tq === null) {
      tq = device.createQuerySet({ type: 'timestamp', count: 2 });
      tres = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | CS });
      trb = device.createBuffer({ size: 16, usage: MR | CD });
    }
    const e = device.createCommandEncoder();
    const t0 = performance.now();
    const p = e.beginComputePass(hasTs ? { timestampWrites: { querySet: tq, beginningOfPassWriteIndex: 0,
      endOfPassWriteIndex: 1 } } : undefined);
    record(p);
    p.end();
    if (hasTs) { e.resolveQuerySet(tq, 0, 2, tres, 0); e.copyBufferToBuffer(tres, 0, trb, 0, 16); }
    if (extra) extra(e);
    device.queue.submit([e.finish()]);
    if (!hasTs) {
      await device.queue.onSubmittedWorkDone();
      return (performance.now() - t0) * 1e3;
    }
    await trb.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(trb.getMappedRange().slice(0)); trb.unmap();
    return Number(t[1] - t[0]) / 1e3;
  }

  // passUs with `counters` (a 16-byte buffer of four u32 the pass counts into) zeroed before and read back after:
  // { us, counts }
  let countsRead = null;
  async function countedPassUs(counters, record) {
    countsRead ??= device.createBuffer({ size: 16, usage: MR | CD });
    device.queue.writeBuffer(counters, 0, new Uint32Array(4));
    const us = await passUs(record, (e) => e.copyBufferToBuffer(counters, 0, countsRead, 0, 16));
    await countsRead.mapAsync(GPUMapMode.READ);
    const counts = new Uint32Array(countsRead.getMappedRange().slice(0));
    countsRead.unmap();
    return { us, counts };
  }

  // the median of passUs(record) over repeats (with timestamps the first, which warms the caches, not counted)
  async function medianPassUs(record) {
    const out = [];
    for (let rep = 0; rep < (hasTs ? 6 : 3); rep++) {
      const us = await passUs(record);
      if (rep > 0 || !hasTs) out.push(us);
    }
    return med(out);
  }

  // µs per dispatch of R back-to-back dispatches (gx × gy workgroups) in one compute pass
  async function time(pipe, bg, gx, gy, R) {
    return (await medianPassUs((p) => {
      p.setPipeline(pipe); p.setBindGroup(0, bg);
      for (let i = 0; i < R; i++) p.dispatchWorkgroups(gx, gy);
    })) / R;
  }

  async function readback(buf, bytes) {
    const rb = device.createBuffer({ size: bytes, usage: MR | CD });
    const e = device.createCommandEncoder(); e.copyBufferToBuffer(buf, 0, rb, 0, bytes); device.queue.submit([e.finish()]);
    await rb.mapAsync(GPUMapMode.READ); const y = new Float32Array(rb.getMappedRange().slice(0)); rb.unmap(); rb.destroy();
    return y;
  }

  // a pipeline of `code` and its bind group: buffers[i] at binding i for the bindings in `used` (default: all; a
  // variant that only declares a binding leaves it out, since `layout: 'auto'` does)
  function bound(code, buffers, used = buffers.map((_, i) => i)) {
    const module = device.createShaderModule({ code });
    const pipe = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
      entries: used.map((binding) => ({ binding, resource: { buffer: buffers[binding] } })) });
    return { pipe, bg };
  }

  return { mkbuf, gpuCopies, time, passUs, countedPassUs, medianPassUs, readback, bound };
}
