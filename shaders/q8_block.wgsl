// One 32-value block of activations quantised as llama.cpp's CPU backend quantises the input of a Q8_0 product
// (ggml quantize_row_q8_0): amax = max|v|, d = f16(amax / 127), q = round-half-even(v · (127 / amax)) in f32, packed
// four int8 codes per u32. Shared by the per-workgroup staging (x_stage_q8.wgsl) and the kernels that write an input
// already quantised (rmsnorm_q8.wgsl), so both give the same codes; and the int8 dot of one block that the
// products reading either (x_stage_q8.wgsl, x_stage_q8pre.wgsl) take.
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

// Σ q_w · q_x over one block: 32 int8 weight codes (c0, c1) against 32 activation codes (q0, q1), four at a time.
fn dot_codes32(c0: vec4<u32>, c1: vec4<u32>, q0: vec4<u32>, q1: vec4<u32>) -> i32 {
  return dot4I8Packed(c0.x, q0.x) + dot4I8Packed(c0.y, q0.y) + dot4I8Packed(c0.z, q0.z) + dot4I8Packed(c0.w, q0.w)
       + dot4I8Packed(c1.x, q1.x) + dot4I8Packed(c1.y, q1.y) + dot4I8Packed(c1.z, q1.z) + dot4I8Packed(c1.w, q1.w);
}
