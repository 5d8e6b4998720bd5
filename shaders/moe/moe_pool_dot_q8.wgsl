// One 32-weight Q8_0 block of a streamed expert (codes and f16 scales planes inside a pool slot) times block b of
// the staged activations (x_stage_q8.wgsl). The pool buffer is bound twice, read-only: as vec4<u32> for the codes
// (a block is 32 bytes = 2 vec4) and as u32 for the scales (two f16 per word).
@group(0) @binding(3) var<storage, read> pool_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> pool_scales: array<u32>;

fn expert_dot_q(base: u32, blk: u32, b: u32) -> f32 {
  let cv = (base + p.codes_off) / 16u + 2u * blk;
  let sh = (base + p.scales_off) / 2u + blk;  // index of the f16 scale
  return xq_dot(pool_codes[cv], pool_codes[cv + 1u], b, unpack2x16float(pool_scales[sh >> 1u])[sh & 1u]);
}
