// One 32-value block of activations quantised as llama.cpp's CPU backend quantises the input of a Q8_0 product
// (ggml quantize_row_q8_0): amax = max|v|, d = f16(amax / 127), q = round-half-even(v · (127 / amax)) in f32, packed
// four int8 codes per u32. Shared by the per-workgroup staging (x_stage_q8.wgsl) and the kernels that write an input
// already quantised (rmsnorm_q8.wgsl), so both give the same codes.
#include "round_f16.wgsl"

struct Q8Block {
  codes: array<u32, 8>,
  d: f32,
}

fn q8_block(v: array<vec4<f32>, 8>) -> Q8Block {
  var amax = 0.0;
  for (var i = 0u; i < 8u; i++) {
    let a = abs(v[i]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  var inv = 0.0;
  if (amax > 0.0) {
    inv = 127.0 / amax;
  }
  var out: Q8Block;
  for (var i = 0u; i < 8u; i++) {
    out.codes[i] = pack4xI8(vec4<i32>(round(v[i] * inv)));
  }
  out.d = round_to_f16(amax / 127.0);
  return out;
}
