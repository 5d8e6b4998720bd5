// A Q8_0 part (gate, up, ...) of a streamed expert record inside a pool buffer, bound twice read-only: as
// vec4<u32> for the codes (a block is 32 bytes = 2 vec4) and as u32 for the f16 scales (two per word). `codes`
// and `scales` are the part's byte offsets in the buffer (16- and 4-byte aligned). Block `blk` of the part times
// block b of the staged activations (x_stage_q8.wgsl).
@group(0) @binding(3) var<storage, read> pool_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> pool_scales: array<u32>;

fn part_dot_q(codes: u32, scales: u32, blk: u32, b: u32) -> f32 {
  let cv = codes / 16u + 2u * blk;
  let sh = scales / 2u + blk;  // index of the f16 scale
  return xq_dot(pool_codes[cv], pool_codes[cv + 1u], b, unpack2x16float(pool_scales[sh >> 1u])[sh & 1u]);
}
