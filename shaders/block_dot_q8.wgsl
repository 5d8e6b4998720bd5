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
