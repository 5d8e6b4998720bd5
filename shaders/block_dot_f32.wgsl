// Block `blk` (32 weights) of an F32 matrix times activations x[x_v0 + 8b ..] (vec4 units; x_stage_f32.wgsl).
fn block_dot_q(blk: u32, b: u32) -> f32 {
  let wv = blk * 8u;
  let xv = x_v0 + b * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(w_f32[wv + i], x[xv + i]);
  }
  return s;
}
