// Q4_0 weights as two planes (the store's layout of a GGUF Q4_0 tensor, py_engine.gguf.split_q4_0):
//   w_codes:  16 bytes of 4-bit codes per block = one vec4<u32> at w_codes[blk]; byte j holds code j in its low
//             nibble and code j + 16 in its high nibble (ggml block_q4_0); value = d · (code − 8).
//   w_scales: the f16 block scales, 2 per u32 (block `blk` in half blk & 1 of word blk >> 1), as weights_q8.wgsl.
// A row of K columns has K/32 blocks; block b of row r is blk = r * (K/32) + b.
@group(0) @binding(3) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> w_scales: array<u32>;

fn w_scale(blk: u32) -> f32 {
  return unpack2x16float(w_scales[blk >> 1u])[blk & 1u];
}

// Four nibbles (one per byte, 0..15) as four int8 codes − 8: each byte is lifted by 0x80 first so that subtracting
// 8 borrows from no neighbouring byte, then the lift is undone (no per-byte unpacking).
fn q4_signed(nibbles: vec4<u32>) -> vec4<u32> {
  return ((nibbles | vec4<u32>(0x80808080u)) - vec4<u32>(0x08080808u)) ^ vec4<u32>(0x80808080u);
}

// One weight: element `e` (= row * K + col) of the matrix, (code − 8) · d in f32 as ggml's dequantize_row_q4_0.
fn w_at(e: u32) -> f32 {
  let blk = e >> 5u;
  let j = e & 31u;
  let byte = j & 15u;
  let word = w_codes[blk][byte >> 2u];
  let code = (word >> ((byte & 3u) * 8u + (j >> 4u) * 4u)) & 15u;
  return f32(i32(code) - 8) * w_scale(blk);
}
