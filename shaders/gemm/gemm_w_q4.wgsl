// Q4_0 weights for the tiled GEMMs, as the store's two planes (weights_q4.wgsl's layout): 16 bytes of 4-bit codes
// per block = one vec4<u32> (byte j: code j in the low nibble, code j + 16 in the high one) and an f16 scale plane
// (two per u32). `cv` is the vec4 index of the block's codes, `sh` the index of its f16 scale.
@group(0) @binding(3) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> w_scales: array<u32>;
const BLK_V: u32 = 1u;  // vec4 words per block

// Four nibbles (one per byte) as four int8 codes − 8 (weights_q4.wgsl's trick: no per-byte unpacking).
fn q4_codes_signed(nibbles: vec4<u32>) -> vec4<u32> {
  return ((nibbles | vec4<u32>(0x80808080u)) - vec4<u32>(0x08080808u)) ^ vec4<u32>(0x80808080u);
}

fn w_block_scale(sh: u32) -> f32 {
  return unpack2x16float(w_scales[sh >> 1u])[sh & 1u];
}

// The block's 32 codes − 8 as int8, 4 per u32 in value order (values 0..15, then 16..31), for the int8 tile
// (gemm_tile_q8.wgsl): Q4_0 weights times activations quantised to Q8_0, as llama.cpp multiplies them.
fn w_block_codes(cv: u32) -> array<vec4<u32>, 2> {
  let c = w_codes[cv];
  return array<vec4<u32>, 2>(q4_codes_signed(c & vec4<u32>(0x0F0F0F0Fu)),
                             q4_codes_signed((c >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu)));
}

// Weights 8q .. 8q + 8 of the block, dequantised ((code − 8) · scale, exact in f32).
fn w_eighth(cv: u32, sh: u32, q: u32) -> array<vec4<f32>, 2> {
  let codes = w_block_codes(cv)[q >> 1u];
  let s = w_block_scale(sh);
  let i = (q & 1u) * 2u;
  return array<vec4<f32>, 2>(vec4<f32>(unpack4xI8(codes[i])) * s, vec4<f32>(unpack4xI8(codes[i + 1u])) * s);
}
