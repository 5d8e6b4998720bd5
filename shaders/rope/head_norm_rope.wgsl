// Per-head RMSNorm (q_norm / k_norm, weight shared by all heads) then NeoX RoPE on the first n_rot dims, on one
// head of hd <= 256 values held in workgroup memory (hv): shared by qk_norm_rope.wgsl and qk_rope_append.wgsl.
// NeoX pairs dims (i, i + n_rot/2), rotated by rope_angle.wgsl's angle; dims >= n_rot keep the normed value. The
// includer defines norm_weight(i) and runs 64 lanes.
var<workgroup> hv: array<f32, 256>;
const SUM_LANES: u32 = 64u;
#include "workgroup_sum.wgsl"
#include "rope_angle.wgsl"

// hv (loaded by every lane before the call) becomes the normed, rotated head; every lane sees it on return.
fn norm_rope_head(t: u32, hd: u32, n_rot: u32, eps: f32, base: f32, use_norm: bool, pos: f32) {
  workgroupBarrier();
  var inv = 1.0;
  if (use_norm) {
    var acc = 0.0;
    for (var i = t; i < hd; i += 64u) {
      let v = hv[i];
      acc += v * v;
    }
    inv = 1.0 / sqrt(workgroup_sum(acc, t) / f32(hd) + eps);
  }
  let half = n_rot / 2u;
  for (var i = t; i < half; i += 64u) {
    var w0 = 1.0;
    var w1 = 1.0;
    if (use_norm) {
      w0 = norm_weight(i);
      w1 = norm_weight(i + half);
    }
    let x0 = hv[i] * inv * w0;
    let x1 = hv[i + half] * inv * w1;
    let ang = rope_angle(pos, i, n_rot, base);
    let c = cos(ang);
    let s = sin(ang);
    hv[i] = x0 * c - x1 * s;
    hv[i + half] = x0 * s + x1 * c;
  }
  if (use_norm) {
    for (var i = n_rot + t; i < hd; i += 64u) {
      hv[i] = hv[i] * inv * norm_weight(i);
    }
  }
  workgroupBarrier();
}
