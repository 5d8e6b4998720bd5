// An F32 part of a streamed expert record (stored raw in the part's codes sub-plane, row-major) inside a pool
// buffer; `codes` is its byte offset (16-byte aligned), `scales` unused. Block `blk` (32 weights) dotted with 32
// activations already loaded (xs).
@group(0) @binding(3) var<storage, read> pool_f32: array<vec4<f32>>;

fn part_dot_xs(codes: u32, scales: u32, blk: u32, xs: array<vec4<f32>, 8>) -> f32 {
  let wv = codes / 16u + 8u * blk;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(pool_f32[wv + i], xs[i]);
  }
  return s;
}
