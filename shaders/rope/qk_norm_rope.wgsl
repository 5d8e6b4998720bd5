// Per-head RMSNorm then NeoX RoPE in place (head_norm_rope.wgsl), for the prefill's chunk of rows. One workgroup
// of 64 per head; a prefill chunk adds rows (workgroup y = row r at x_base + r·row_stride, position step.pos + r,
// with the chunk uniform bound as `step`). A decode token uses qk_rope_append.wgsl.
#include "step.wgsl"
struct Params { hd: u32, n_rot: u32, eps: f32, base: f32, x_base: u32, use_norm: u32, row_stride: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

fn norm_weight(i: u32) -> f32 {
  return w[i];
}

#include "head_norm_rope.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let b = p.x_base + wg.y * p.row_stride + wg.x * p.hd;
  for (var i = t; i < p.hd; i += 64u) {
    hv[i] = x[b + i];
  }
  norm_rope_head(t, p.hd, p.n_rot, p.eps, p.base, p.use_norm != 0u, f32(step.pos + wg.y));
  for (var i = t; i < p.hd; i += 64u) {
    x[b + i] = hv[i];
  }
}
