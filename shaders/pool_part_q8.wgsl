// A Q8_0 part (gate, up, ...) of a streamed expert record inside a pool buffer, bound twice read-only: as
// vec4<u32> for the codes (a block is 32 bytes = 2 vec4) and as u32 for the f16 scales (two per word). `codes`
// and `scales` are the part's byte offsets in the buffer (16- and 4-byte aligned). Block `blk` of the part
// dotted with 32 activations already loaded (xs).
@group(0) @binding(3) var<storage, read> pool_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> pool_scales: array<u32>;

fn part_dot_xs(codes: u32, scales: u32, blk: u32, xs: array<vec4<f32>, 8>) -> f32 {
  let cv = codes / 16u + 2u * blk;
  let c0 = pool_codes[cv];
  let c1 = pool_codes[cv + 1u];
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), xs[0]) + dot(vec4<f32>(unpack4xI8(c0.y)), xs[1]);
  s += dot(vec4<f32>(unpack4xI8(c0.z)), xs[2]) + dot(vec4<f32>(unpack4xI8(c0.w)), xs[3]);
  s += dot(vec4<f32>(unpack4xI8(c1.x)), xs[4]) + dot(vec4<f32>(unpack4xI8(c1.y)), xs[5]);
  s += dot(vec4<f32>(unpack4xI8(c1.z)), xs[6]) + dot(vec4<f32>(unpack4xI8(c1.w)), xs[7]);
  let sh = scales / 2u + blk;  // index of the f16 scale
  return s * unpack2x16float(pool_scales[sh >> 1u])[sh & 1u];
}
