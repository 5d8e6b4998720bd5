// A post-norm residual add (gemma4's post_attention_norm, post_ffw_norm_*): y = (y + x / sqrt(mean(x²) + eps) · w)
// · s, with s = scale[0] where p.scaled = 1 (layer_output_scale), else 1. One workgroup per row of n values.
struct Params { n: u32, eps: f32, scaled: u32, pad0: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> scale: array<f32>;

const SUM_LANES: u32 = 256u;
#include "workgroup_sum.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let b = wg.x * p.n;
  var acc = 0.0;
  for (var i = t; i < p.n; i += 256u) {
    let v = x[b + i];
    acc += v * v;
  }
  let inv = 1.0 / sqrt(workgroup_sum(acc, t) / f32(p.n) + p.eps);
  var s = 1.0;
  if (p.scaled != 0u) {
    s = scale[0];
  }
  for (var i = t; i < p.n; i += 256u) {
    let out = y[b + i] + x[b + i] * inv * w[i];
    if (p.scaled != 0u) {
      y[b + i] = out * s;
    } else {
      y[b + i] = out;
    }
  }
}
