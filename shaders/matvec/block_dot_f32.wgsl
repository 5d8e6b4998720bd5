// Block `blk` (32 weights) of an F32 matrix times activations x4(x_v0 + 8b ..) (vec4 units; the x_stage_*.wgsl
// included reads them from x, or from workgroup memory where x was staged there).
fn block_dot_q(blk: u32, b: u32) -> f32 {
  let wv = blk * 8u;
  let xv = x_v0 + b * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(w_f32[wv + i], x4(xv + i));
  }
  return s;
}
