// An F32 part of a streamed expert record (stored raw in the part's codes sub-plane, row-major) inside a pool
// buffer; `codes` is its byte offset (16-byte aligned), `scales` unused. Block `blk` (32 weights) times
// activations x[x_v0 + 8b ..] (x_stage_f32.wgsl).
@group(0) @binding(3) var<storage, read> pool_f32: array<vec4<f32>>;

fn part_dot_q(codes: u32, scales: u32, blk: u32, b: u32) -> f32 {
  let wv = codes / 16u + 8u * blk;
  let xv = x_v0 + b * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(pool_f32[wv + i], x[xv + i]);
  }
  return s;
}
