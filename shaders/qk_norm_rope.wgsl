// Per-head RMSNorm (q_norm / k_norm, weight shared by all heads) then NeoX RoPE on the first n_rot dims of each
// head, in place. NeoX pairs dims (i, i + n_rot/2) with angle pos * base^(-2i/n_rot) (llama.cpp rope mode NEOX,
// no YaRN scaling); dims >= n_rot keep the normed value. One workgroup of 64 per head; a prefill chunk adds rows
// (workgroup y = row r at x_base + r·row_stride, position step.pos + r, with the chunk uniform bound as `step`).
#include "step.wgsl"
struct Params { hd: u32, n_rot: u32, eps: f32, base: f32, x_base: u32, use_norm: u32, row_stride: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

var<workgroup> red: array<f32, 64>;

const TWO_PI_HI: f32 = 6.28318548202514648;   // f32(2π)
const TWO_PI_LO: f32 = -1.74845553e-7;        // 2π - f32(2π)

// cos/sin are only accurate on [-π, π] in WGSL: reduce the angle first (two-part 2π keeps the reduction exact
// enough for positions up to ~10^6).
fn reduce_angle(a: f32) -> f32 {
  let k = round(a / TWO_PI_HI);
  return (a - k * TWO_PI_HI) - k * TWO_PI_LO;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let b = p.x_base + wg.y * p.row_stride + wg.x * p.hd;
  var inv = 1.0;
  if (p.use_norm != 0u) {
    var acc = 0.0;
    for (var i = t; i < p.hd; i += 64u) {
      let v = x[b + i];
      acc += v * v;
    }
    red[t] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
      if (t < s) {
        red[t] += red[t + s];
      }
      workgroupBarrier();
    }
    inv = 1.0 / sqrt(red[0] / f32(p.hd) + p.eps);
  }
  let half = p.n_rot / 2u;
  let pos = f32(step.pos + wg.y);
  for (var i = t; i < half; i += 64u) {
    var w0 = 1.0;
    var w1 = 1.0;
    if (p.use_norm != 0u) {
      w0 = w[i];
      w1 = w[i + half];
    }
    let x0 = x[b + i] * inv * w0;
    let x1 = x[b + i + half] * inv * w1;
    let ang = reduce_angle(pos * pow(p.base, -2.0 * f32(i) / f32(p.n_rot)));
    let c = cos(ang);
    let s = sin(ang);
    x[b + i] = x0 * c - x1 * s;
    x[b + i + half] = x0 * s + x1 * c;
  }
  if (p.use_norm != 0u) {
    for (var i = p.n_rot + t; i < p.hd; i += 64u) {
      x[b + i] = x[b + i] * inv * w[i];
    }
  }
}
