// Q6_K weights as stored (one plane of the GGUF's 210-byte blocks of 256 values, rows of whole blocks): ql[128] the
// low 4 bits, qh[64] the high 2 bits, sc[16] int8 scales (one per 16 values), d the f16 block scale
// (diskformer/reference/dequant.py writes the layout out). A block starts on an even byte only, so bytes are read
// out of u32 words.
@group(0) @binding(3) var<storage, read> w_q6k: array<u32>;

const Q6K_BLOCK_BYTES: u32 = 210u;

fn q6k_byte(i: u32) -> u32 {
  return (w_q6k[i >> 2u] >> ((i & 3u) * 8u)) & 0xFFu;
}

// One weight: element `e` (= row * K + col) of the matrix, (d · sc) · (q − 32) in f32 in that order, as ggml's
// dequantize_row_q6_K rounds it (bit for bit). Within each half of 128 values, quarter k (32 values, l < 32) takes
// ql[l + 32 (k & 1)] (low nibble for k < 2, high for k >= 2), bits 2k of qh[l] and sc[l / 16 + 2k].
fn w_at(e: u32) -> f32 {
  let base = (e >> 8u) * Q6K_BLOCK_BYTES;
  let v = e & 255u;
  let half = v >> 7u;
  let quarter = (v >> 5u) & 3u;
  let l = v & 31u;
  let lo = (q6k_byte(base + 64u * half + 32u * (quarter & 1u) + l) >> (4u * (quarter >> 1u))) & 15u;
  let hi = (q6k_byte(base + 128u + 32u * half + l) >> (2u * quarter)) & 3u;
  let sc = (i32(q6k_byte(base + 192u + 8u * half + 2u * quarter + (l >> 4u))) << 24u) >> 24u;
  let d_at = base + 208u;
  let d = unpack2x16float(w_q6k[d_at >> 2u])[(d_at >> 1u) & 1u];
  return (d * f32(sc)) * f32(i32(lo | (hi << 4u)) - 32);
}
