// Block `blk` (32 weights) of a Q4_0 matrix (weights_q4.wgsl) times block b of the staged activations: the low
// nibbles are values 0..15 and the high nibbles values 16..31, in the order x_stage_q8.wgsl stages a block's codes,
// so after q4_signed they go through the same int8 dot as Q8_0 weights (llama.cpp multiplies a Q4_0 matrix with
// its input quantised to Q8_0: ggml_vec_dot_q4_0_q8_0). With x_stage_f32.wgsl, f32 activations instead.
fn block_dot_q(blk: u32, b: u32) -> f32 {
  let c = w_codes[blk];
  let lo = q4_signed(c & vec4<u32>(0x0F0F0F0Fu));
  let hi = q4_signed((c >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu));
  return xq_dot(lo, hi, b, w_scale(blk));
}
