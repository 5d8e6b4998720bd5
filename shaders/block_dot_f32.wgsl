// Dot product of 32 F32 weights (block `blk` of the row-major matrix) with x[xv .. xv + 8) (vec4 units).
fn block_dot(blk: u32, xv: u32) -> f32 {
  let wv = blk * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(w_f32[wv + i], x[xv + i]);
  }
  return s;
}

// The same with the 32 activations already loaded (xs), so one load of x serves several rows.
fn block_dot_xs(blk: u32, xs: array<vec4<f32>, 8>) -> f32 {
  let wv = blk * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(w_f32[wv + i], xs[i]);
  }
  return s;
}
