// The second weight matrix of a fused pair (the "up" half of gate/up), Q8_0 planes at bindings 7 (codes) and 8
// (f16 scales), laid out as in weights_q8.wgsl; block `blk` dotted with 32 activations already loaded (xs).
@group(0) @binding(7) var<storage, read> u_codes: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read> u_scales: array<u32>;

fn up_block_dot_xs(blk: u32, xs: array<vec4<f32>, 8>) -> f32 {
  let c0 = u_codes[2u * blk];
  let c1 = u_codes[2u * blk + 1u];
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), xs[0]) + dot(vec4<f32>(unpack4xI8(c0.y)), xs[1]);
  s += dot(vec4<f32>(unpack4xI8(c0.z)), xs[2]) + dot(vec4<f32>(unpack4xI8(c0.w)), xs[3]);
  s += dot(vec4<f32>(unpack4xI8(c1.x)), xs[4]) + dot(vec4<f32>(unpack4xI8(c1.y)), xs[5]);
  s += dot(vec4<f32>(unpack4xI8(c1.z)), xs[6]) + dot(vec4<f32>(unpack4xI8(c1.w)), xs[7]);
  return s * unpack2x16float(u_scales[blk >> 1u])[blk & 1u];
}
