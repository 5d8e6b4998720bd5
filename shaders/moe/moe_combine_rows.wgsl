// Weighted sum of each chunk token's k routed outputs onto its residual row (the chunk form of moe_combine.wgsl,
// same summation order): h[t·n + i] += Σ_j route_w[t·k + j] · y[(t·k + j)·n + i] for t < chunk.n.
#include "chunk.wgsl"
struct Params { n: u32, k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> route_w: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= p.n || t >= chunk.n) {
    return;
  }
  var s = 0.0;
  for (var j = 0u; j < p.k; j++) {
    s += route_w[t * p.k + j] * y[(t * p.k + j) * p.n + i];
  }
  h[t * p.n + i] += s;
}
