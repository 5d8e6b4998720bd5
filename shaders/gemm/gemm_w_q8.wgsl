// Q8_0 weights for the tiled GEMMs: a code plane read as vec4<u32> (a 32-weight block = 2 vec4) and an f16 scale
// plane (two per u32). `cv` is the vec4 index where the block's codes start, `sh` the index of its f16 scale.
@group(0) @binding(3) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> w_scales: array<u32>;
const BLK_V: u32 = 2u;  // vec4 words per block

// Weights 8q .. 8q + 8 of the block, dequantised (code · scale, exact in f32).
fn w_eighth(cv: u32, sh: u32, q: u32) -> array<vec4<f32>, 2> {
  let c = w_codes[cv + (q >> 1u)];
  let s = w_block_scale(sh);
  var lo = c.x;
  var hi = c.y;
  if ((q & 1u) == 1u) {
    lo = c.z;
    hi = c.w;
  }
  return array<vec4<f32>, 2>(vec4<f32>(unpack4xI8(lo)) * s, vec4<f32>(unpack4xI8(hi)) * s);
}

// The block's scale, and its 32 codes as stored (4 per u32), for the int8 tile (gemm_tile_q8.wgsl).
fn w_block_scale(sh: u32) -> f32 {
  return unpack2x16float(w_scales[sh >> 1u])[sh & 1u];
}

fn w_block_codes(cv: u32) -> array<vec4<u32>, 2> {
  return array<vec4<u32>, 2>(w_codes[cv], w_codes[cv + 1u]);
}
