// A Q8_0 block (codes c0, c1; scale d_w) times f32 activations x4(x_v0 + 8b ..), the accessor of the x_stage_*.wgsl
// that includes this.
fn xq_dot(c0: vec4<u32>, c1: vec4<u32>, b: u32, d_w: f32) -> f32 {
  let xv = x_v0 + b * 8u;
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), x4(xv)) + dot(vec4<f32>(unpack4xI8(c0.y)), x4(xv + 1u));
  s += dot(vec4<f32>(unpack4xI8(c0.z)), x4(xv + 2u)) + dot(vec4<f32>(unpack4xI8(c0.w)), x4(xv + 3u));
  s += dot(vec4<f32>(unpack4xI8(c1.x)), x4(xv + 4u)) + dot(vec4<f32>(unpack4xI8(c1.y)), x4(xv + 5u));
  s += dot(vec4<f32>(unpack4xI8(c1.z)), x4(xv + 6u)) + dot(vec4<f32>(unpack4xI8(c1.w)), x4(xv + 7u));
  return s * d_w;
}
