// Block `blk` (32 weights) of a Q8_0 matrix (weights_q8.wgsl) times block b of the staged activations
// (x_stage_q8.wgsl): int8 dot products, f32 block scales.
fn block_dot_q(blk: u32, b: u32) -> f32 {
  return xq_dot(w_codes[2u * blk], w_codes[2u * blk + 1u], b, w_scale(blk));
}
