// RMSNorm of `rows` rows of n values: y = x / sqrt(mean(x²) + eps) * w (llama.cpp's rms_norm then mul by weight).
// One workgroup per row.
struct Params { n: u32, eps: f32, x_base: u32, y_base: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const SUM_LANES: u32 = 256u;
#include "workgroup_sum.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let xb = p.x_base + wg.x * p.n;
  let yb = p.y_base + wg.x * p.n;
  var acc = 0.0;
  for (var i = t; i < p.n; i += 256u) {
    let v = x[xb + i];
    acc += v * v;
  }
  let inv = 1.0 / sqrt(workgroup_sum(acc, t) / f32(p.n) + p.eps);
  for (var i = t; i < p.n; i += 256u) {
    y[yb + i] = x[xb + i] * inv * w[i];
  }
}
