// Dot product of one 32-weight Q8_0 block with 32 activations x[xv .. xv + 8) (vec4 units), f32 accumulation.
fn block_dot(blk: u32, xv: u32) -> f32 {
  let c0 = w_codes[2u * blk];
  let c1 = w_codes[2u * blk + 1u];
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), x[xv]) + dot(vec4<f32>(unpack4xI8(c0.y)), x[xv + 1u]);
  s += dot(vec4<f32>(unpack4xI8(c0.z)), x[xv + 2u]) + dot(vec4<f32>(unpack4xI8(c0.w)), x[xv + 3u]);
  s += dot(vec4<f32>(unpack4xI8(c1.x)), x[xv + 4u]) + dot(vec4<f32>(unpack4xI8(c1.y)), x[xv + 5u]);
  s += dot(vec4<f32>(unpack4xI8(c1.z)), x[xv + 6u]) + dot(vec4<f32>(unpack4xI8(c1.w)), x[xv + 7u]);
  return s * w_scale(blk);
}

// The same with the 32 activations already loaded (xs), so one load of x serves several rows.
fn block_dot_xs(blk: u32, xs: array<vec4<f32>, 8>) -> f32 {
  let c0 = w_codes[2u * blk];
  let c1 = w_codes[2u * blk + 1u];
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), xs[0]) + dot(vec4<f32>(unpack4xI8(c0.y)), xs[1]);
  s += dot(vec4<f32>(unpack4xI8(c0.z)), xs[2]) + dot(vec4<f32>(unpack4xI8(c0.w)), xs[3]);
  s += dot(vec4<f32>(unpack4xI8(c1.x)), xs[4]) + dot(vec4<f32>(unpack4xI8(c1.y)), xs[5]);
  s += dot(vec4<f32>(unpack4xI8(c1.z)), xs[6]) + dot(vec4<f32>(unpack4xI8(c1.w)), xs[7]);
  return s * w_scale(blk);
}
