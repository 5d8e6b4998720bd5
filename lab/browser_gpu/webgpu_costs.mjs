// The basic costs of WebGPU, measured by the same code in a browser tab (navigator.gpu) and in Node with Dawn's
// `webgpu` package: a tab's calls cross to Chromium's GPU process, Node's go to Dawn in-process, so the ratio of the
// two says what the tab adds to the engine's dispatch- and sync-bound decode.
//   measureCosts(gpu) -> { adapter, limits, features, figures, notes }
// Figures (medians of repeats, wall clock from the JS side):
//   dispatch_*_us      µs per dispatch of 1,000 in one compute pass and one submit, up to the GPU's finish
//                      (slope between 1,000 and 10 dispatches); "empty" binds nothing, "chained" writes the buffer
//                      the one before wrote (Dawn puts a barrier between them, as between the decode's kernels)
//   encode_us          µs of JS time per dispatch to encode and submit that pass (no waiting)
//   submit_wait_us     an empty submit and onSubmittedWorkDone, round trip
//   readback_4B_us     one dispatch + a 4-byte copy + submit + mapAsync + read + unmap (the engine's per-token sync)
//   write_buffer_GBps  queue.writeBuffer of 512 MiB (64 when small) in chunks of 1, 16 and 64 MiB, up to the GPU's
//                      finish
//   read_back_GBps     a 64 MiB copy into a mappable buffer, mapAsync, and the bytes copied into JS memory
//   stream_read_GBps   a kernel that reads a buffer of up to 1 GiB once (the best of a few launch shapes)

const MiB = 1 << 20;
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const round = (x, digits = 2) => Number(x.toFixed(digits));

function adapterFacts(adapter) {
  const info = adapter.info || {};
  const facts = {};
  for (const key of ['vendor', 'architecture', 'device', 'description', 'subgroupMinSize', 'subgroupMaxSize',
    'isFallbackAdapter', 'driver', 'backend', 'type']) {
    if (info[key] !== undefined && info[key] !== '') facts[key] = info[key];
  }
  if (facts.isFallbackAdapter === undefined && adapter.isFallbackAdapter !== undefined) {
    facts.isFallbackAdapter = adapter.isFallbackAdapter;
  }
  return facts;
}

const LIMITS = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupsPerDimension'];

export async function probeAdapter(gpu) {
  if (!gpu) return { error: 'this context has no navigator.gpu (WebGPU is off: see the flags)' };
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return { error: 'requestAdapter() returned null: no WebGPU adapter was found' };
  const limits = {};
  for (const key of LIMITS) limits[key] = adapter.limits[key];
  return { adapter: adapterFacts(adapter), limits, features: [...adapter.features].sort() };
}

function pipelineOf(device, code) {
  return device.createComputePipeline({
    layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
}

// µs per dispatch: the slope of (encode + submit + finish) between `many` and `few` dispatches in one pass
async function dispatchCost(device, record) {
  const run = async (count) => {
    const t0 = performance.now();
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    record(pass, count);
    pass.end();
    device.queue.submit([encoder.finish()]);
    const encoded = performance.now();
    await device.queue.onSubmittedWorkDone();
    return { total: performance.now() - t0, encode: encoded - t0 };
  };
  await run(1000);
  const many = [], few = [], encode = [];
  for (let rep = 0; rep < 9; rep++) {
    const m = await run(1000);
    many.push(m.total); encode.push(m.encode);
    few.push((await run(10)).total);
  }
  // ms per 1,000 dispatches is µs per dispatch
  return { us: (median(many) - median(few)) * 1000 / 990, encodeUs: median(encode), totalMs: median(many) };
}

async function dispatchFigures(device) {
  const empty = pipelineOf(device, '@compute @workgroup_size(64) fn main() {}');
  const chainCode = `@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) { y[g.x] = y[g.x] + 1u; }`;
  const chain = pipelineOf(device, chainCode);
  const counter = device.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE });
  const group = device.createBindGroup({ layout: chain.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: counter } }] });
  const emptyCost = await dispatchCost(device, (pass, count) => {
    pass.setPipeline(empty);
    for (let i = 0; i < count; i++) pass.dispatchWorkgroups(1);
  });
  const chainCost = await dispatchCost(device, (pass, count) => {
    pass.setPipeline(chain);
    pass.setBindGroup(0, group);
    for (let i = 0; i < count; i++) pass.dispatchWorkgroups(1);
  });
  // the engine's form: pipeline and bind group set again before every dispatch
  const rebindCost = await dispatchCost(device, (pass, count) => {
    for (let i = 0; i < count; i++) {
      pass.setPipeline(chain);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(1);
    }
  });
  counter.destroy();
  return {
    dispatch_empty_us: round(emptyCost.us, 3),
    dispatch_chained_us: round(chainCost.us, 3),
    dispatch_rebind_chained_us: round(rebindCost.us, 3),
    encode_us: round(rebindCost.encodeUs, 3),
    pass_1000_rebind_ms: round(rebindCost.totalMs, 3),
  };
}

// the time of `count` repeats of `once`, as the mean (timer-resolution proof) and the median of single repeats
async function roundTrip(once, count) {
  for (let i = 0; i < 10; i++) await once();
  const singles = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await once();
    singles.push(performance.now() - t);
  }
  return { meanUs: (performance.now() - t0) * 1000 / count, medianUs: median(singles) * 1000 };
}

async function syncFigures(device) {
  const code = `@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = y[0] + 1u; }`;
  const pipe = pipelineOf(device, code);
  const value = device.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const staging = device.createBuffer({ size: 256, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const group = device.createBindGroup({ layout: pipe.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: value } }] });
  const submitWait = await roundTrip(async () => {
    device.queue.submit([device.createCommandEncoder().finish()]);
    await device.queue.onSubmittedWorkDone();
  }, 200);
  let last = 0, stepsSeen = 0;
  const readback = await roundTrip(async () => {
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipe); pass.setBindGroup(0, group); pass.dispatchWorkgroups(1); pass.end();
    encoder.copyBufferToBuffer(value, 0, staging, 0, 4);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ, 0, 4);
    const now = new Uint32Array(staging.getMappedRange(0, 4))[0];
    staging.unmap();
    if (now === last + 1) stepsSeen++;
    last = now;
  }, 200);
  value.destroy(); staging.destroy();
  return {
    figures: {
      submit_wait_us: round(submitWait.meanUs, 1), submit_wait_median_us: round(submitWait.medianUs, 1),
      readback_4B_us: round(readback.meanUs, 1), readback_4B_median_us: round(readback.medianUs, 1),
    },
    // each round trip must have seen the one dispatch before it, or the figure timed nothing
    check: stepsSeen === 210 ? 'ok' : `readback saw ${stepsSeen} of 210 increments`,
  };
}

async function writeFigures(device, total) {
  const target = device.createBuffer({ size: 256 * MiB, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const figures = {};
  for (const chunkMiB of [1, 16, 64]) {
    const chunk = new Uint8Array(chunkMiB * MiB);
    for (let i = 0; i < chunk.length; i += 4096) chunk[i] = i & 255;
    const once = async () => {
      const t0 = performance.now();
      for (let done = 0; done < total; done += chunk.length) {
        device.queue.writeBuffer(target, done % (256 * MiB), chunk);
      }
      await device.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    };
    await once();
    const times = [await once(), await once(), await once()];
    figures[`write_buffer_${chunkMiB}MiB_GBps`] = round(total / median(times) / 1e6, 2);
  }
  target.destroy();
  return figures;
}

async function readBackFigure(device) {
  const size = 64 * MiB;
  const source = device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const staging = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const once = async () => {
    const t0 = performance.now();
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(source, 0, staging, 0, size);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const bytes = new Uint8Array(staging.getMappedRange()).slice();
    staging.unmap();
    if (bytes.length !== size) throw new Error('the mapped range was shorter than the buffer');
    return performance.now() - t0;
  };
  await once();
  const times = [];
  for (let i = 0; i < 5; i++) times.push(await once());
  source.destroy(); staging.destroy();
  return { read_back_64MiB_GBps: round(size / median(times) / 1e6, 2) };
}

async function streamReadFigure(device, largest) {
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
  const bytes = Math.min(largest, Math.floor(limit / (16 * MiB)) * 16 * MiB);
  const words = bytes / 16;
  const source = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE });
  const sink = device.createBuffer({ size: 4 * MiB, usage: GPUBufferUsage.STORAGE });
  let best = null;
  for (const [lanes, perLane] of [[256, 4], [256, 16], [256, 64]]) {
    const threads = Math.ceil(words / perLane);
    // lane t reads words t, t + threads, ...: each pass over the buffer is coalesced; the xor keeps the loads live
    const code = `@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(${lanes}) fn main(@builtin(global_invocation_id) g: vec3<u32>,
    @builtin(num_workgroups) n: vec3<u32>) {
  let t = g.y * n.x * ${lanes}u + g.x;
  var acc = vec4<u32>(0u);
  for (var i = 0u; i < ${perLane}u; i++) { let k = t + i * ${threads}u; if (k < ${words}u) { acc ^= a[k]; } }
  if (acc.x == 0xdeadbeefu) { o[t & 0xfffffu] = acc.y; }
}`;
    const pipe = pipelineOf(device, code);
    const group = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [
      { binding: 0, resource: { buffer: source } }, { binding: 1, resource: { buffer: sink } }] });
    const groups = Math.ceil(threads / lanes);
    const gx = Math.min(groups, 65535), gy = Math.ceil(groups / gx);
    const run = async (count) => {
      const t0 = performance.now();
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipe); pass.setBindGroup(0, group);
      for (let i = 0; i < count; i++) pass.dispatchWorkgroups(gx, gy);
      pass.end();
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    };
    await run(2);
    const times = [];
    for (let i = 0; i < 5; i++) times.push(await run(10) / 10);
    const GBps = bytes / median(times) / 1e6;
    if (!best || GBps > best.GBps) best = { GBps, lanes, perLane };
  }
  source.destroy(); sink.destroy();
  return { stream_read_GBps: round(best.GBps, 0), stream_read_bytes: bytes,
    stream_read_shape: `${best.lanes} lanes x ${best.perLane} vec4 per lane` };
}

// options.small: smaller transfers and reads, for CPU adapters (lavapipe, SwiftShader), where the full sizes take
// minutes
export async function measureCosts(gpu, options = {}) {
  const writeTotal = options.small ? 64 * MiB : 512 * MiB;
  const largestRead = options.small ? 64 * MiB : 1024 * MiB;
  const probe = await probeAdapter(gpu);
  if (probe.error) return probe;
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  const device = await adapter.requestDevice({ requiredLimits: {
    maxBufferSize: adapter.limits.maxBufferSize,
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize } });
  const errors = [];
  device.addEventListener?.('uncapturederror', (event) => errors.push(String(event.error?.message || event.error)));
  const sync = await syncFigures(device);
  const figures = {
    ...await dispatchFigures(device), ...sync.figures, ...await writeFigures(device, writeTotal),
    ...await readBackFigure(device), ...await streamReadFigure(device, largestRead),
  };
  device.destroy();
  return { ...probe, figures, checks: { readback: sync.check, device_errors: errors } };
}
