// Q8_0 weights as two planes (the engine layout of a GGUF Q8_0 tensor):
//   w_codes:  the int8 codes, 32 per block, row-major; block `blk` = 32 bytes = 2 vec4<u32> at w_codes[2*blk].
//   w_scales: the f16 block scales, 2 per u32 (block `blk` in half blk & 1 of word blk >> 1).
// A row of K columns has K/32 blocks; block b of row r is blk = r * (K/32) + b.
@group(0) @binding(3) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> w_scales: array<u32>;

fn w_scale(blk: u32) -> f32 {
  return unpack2x16float(w_scales[blk >> 1u])[blk & 1u];
}

// One weight: element `e` (= row * K + col) of the matrix.
fn w_at(e: u32) -> f32 {
  let word = w_codes[e >> 4u][(e >> 2u) & 3u];
  return f32(unpack4xI8(word)[e & 3u]) * w_scale(e >> 5u);
}
