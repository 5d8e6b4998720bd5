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

// Written out with constant indices only: the loop form (v[i], codes[i]) cost the routed gate/up product ~2 µs more
// on the H200 when timed alone (lab/gpu_probes/route_variants.mjs), ~4 µs per decoded token in all in the engine's
// profile. A max is exact in any order.
fn q8_block(v: array<vec4<f32>, 8>) -> Q8Block {
  let a = max(max(max(abs(v[0]), abs(v[1])), max(abs(v[2]), abs(v[3]))),
              max(max(abs(v[4]), abs(v[5])), max(abs(v[6]), abs(v[7]))));
  let amax = max(max(a.x, a.y), max(a.z, a.w));
  var inv = 0.0;
  if (amax > 0.0) {
    inv = 127.0 / amax;
  }
  var out: Q8Block;
  out.codes[0] = pack4xI8(vec4<i32>(round(v[0] * inv)));
  out.codes[1] = pack4xI8(vec4<i32>(round(v[1] * inv)));
  out.codes[2] = pack4xI8(vec4<i32>(round(v[2] * inv)));
  out.codes[3] = pack4xI8(vec4<i32>(round(v[3] * inv)));
  out.codes[4] = pack4xI8(vec4<i32>(round(v[4] * inv)));
  out.codes[5] = pack4xI8(vec4<i32>(round(v[5] * inv)));
  out.codes[6] = pack4xI8(vec4<i32>(round(v[6] * inv)));
  out.codes[7] = pack4xI8(vec4<i32>(round(v[7] * inv)));
  out.d = round_to_f16(amax / 127.0);
  return out;
}

// Σ q_w · q_x over one block: 32 int8 weight codes (c0, c1) against 32 activation codes (q0, q1), four at a time.
fn dot_codes32(c0: vec4<u32>, c1: vec4<u32>, q0: vec4<u32>, q1: vec4<u32>) -> i32 {
  return dot4I8Packed(c0.x, q0.x) + dot4I8Packed(c0.y, q0.y) + dot4I8Packed(c0.z, q0.z) + dot4I8Packed(c0.w, q0.w)
       + dot4I8Packed(c1.x, q1.x) + dot4I8Packed(c1.y, q1.y) + dot4I8Packed(c1.z, q1.z) + dot4I8Packed(c1.w, q1.w);
}
