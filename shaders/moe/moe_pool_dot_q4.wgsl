// One 32-weight Q4_0 block of a streamed expert (the store's nibble and f16-scale sub-planes inside a pool slot)
// times block b of the staged activations, as block_dot_q4.wgsl does for a resident matrix. The pool buffer is
// bound twice, read-only: as vec4<u32> for the codes (a block's 16 bytes = 1 vec4) and as u32 for the scales.
@group(0) @binding(3) var<storage, read> pool_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> pool_scales: array<u32>;

// Four nibbles (one per byte) as four int8 codes − 8 (weights_q4.wgsl's trick).
fn pool_q4_signed(nibbles: vec4<u32>) -> vec4<u32> {
  return ((nibbles | vec4<u32>(0x80808080u)) - vec4<u32>(0x08080808u)) ^ vec4<u32>(0x80808080u);
}

fn expert_dot_q(base: u32, blk: u32, b: u32) -> f32 {
  let c = pool_codes[(base + p.codes_off) / 16u + blk];
  let sh = (base + p.scales_off) / 2u + blk;  // index of the f16 scale
  return xq_dot(pool_q4_signed(c & vec4<u32>(0x0F0F0F0Fu)),
                pool_q4_signed((c >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu)), b,
                unpack2x16float(pool_scales[sh >> 1u])[sh & 1u]);
}
