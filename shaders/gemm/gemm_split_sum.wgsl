// The K slices of a split prefill GEMM (gemm.wgsl) added: Y[t·y_stride + y_base + r] (+)= Σ_z part[z·T·rows + t·rows
// + r], slices in order, for the chunk's rows t < n. Workgroups: (ceil(rows / 256), T).
#include "chunk.wgsl"
struct Params { rows: u32, slices: u32, y_base: u32, y_stride: u32, accumulate: u32, slice_stride: u32, pad0: u32,
                pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> part: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  let t = gid.y;
  if (r >= p.rows || t >= chunk.n) {
    return;
  }
  var acc = part[t * p.rows + r];
  for (var z = 1u; z < p.slices; z++) {
    acc += part[z * p.slice_stride + t * p.rows + r];
  }
  let o = t * p.y_stride + p.y_base + r;
  if (p.accumulate != 0u) {
    y[o] += acc;
  } else {
    y[o] = acc;
  }
}
