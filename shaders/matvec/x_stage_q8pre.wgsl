// The activation operand of a Q8_0 product already quantised by the kernel that wrote it (rmsnorm_q8.wgsl: the
// same codes and scales x_stage_q8.wgsl would stage), read from global memory where x_stage_q8.wgsl stages it: no
// per-workgroup quantisation and no barrier, which pays on a product of many workgroups (the output head: ~15k).
// xq (binding 7, in place of x) holds, from vec4 xv0: 2 vec4 of codes per block, then the nb block scales (f32
// bits), 4 per vec4. Only Q8_0 weights read it (xq_dot); there is no f32 view.
@group(0) @binding(7) var<storage, read> xq: array<vec4<u32>>;
#include "q8_block.wgsl"

var<private> x_v0: u32;
var<private> x_nb: u32;

fn stage_x(tid: u32, wg_size: u32, xv0: u32, nb: u32) {
  x_v0 = xv0;
  x_nb = nb;
}

fn xq_dot(c0: vec4<u32>, c1: vec4<u32>, b: u32, d_w: f32) -> f32 {
  let q0 = xq[x_v0 + 2u * b];
  let q1 = xq[x_v0 + 2u * b + 1u];
  let d_x = bitcast<f32>(xq[x_v0 + 2u * x_nb + b / 4u][b % 4u]);
  let s = dot_codes32(c0, c1, q0, q1);
  return (d_w * d_x) * f32(s);
}
