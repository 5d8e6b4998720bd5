// d rounded to the nearest f16 (ties to even) and back to f32, as ggml's fp32 -> fp16 conversion rounds the Q8_0
// block scales; pack2x16float's rounding is not specified (some drivers truncate). For 0 <= d far below the f16
// maximum (activation scales amax / 127).
fn round_to_f16(d: f32) -> f32 {
  if (d < 6.103515625e-05) {   // f16 subnormals: steps of 2^-24
    return round(d * 16777216.0) / 16777216.0;
  }
  let b = bitcast<u32>(d);
  return bitcast<f32>((b + 0xfffu + ((b >> 13u) & 1u)) & 0xffffe000u);
}
