// Gated RMSNorm closing a Gated DeltaNet layer (llama.cpp build_norm_gated): per value head h of dv values,
//   y[h·dv + j] = o[h·dv + j] / sqrt(mean_j(o²) + eps) · ssm_norm[j] · silu(z[z_base + h·dv + j])
// (ssm_norm is shared by the heads and already includes the +1). One workgroup of 64 per head.
struct Params { dv: u32, eps: f32, z_base: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> o: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> z: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const SUM_LANES: u32 = 64u;
#include "workgroup_sum.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let b = wg.x * p.dv;
  var acc = 0.0;
  for (var j = t; j < p.dv; j += 64u) {
    let v = o[b + j];
    acc += v * v;
  }
  let inv = 1.0 / sqrt(workgroup_sum(acc, t) / f32(p.dv) + p.eps);
  for (var j = t; j < p.dv; j += 64u) {
    let g = z[p.z_base + b + j];
    y[b + j] = o[b + j] * inv * w[j] * (g / (1.0 + exp(-g)));
  }
}
