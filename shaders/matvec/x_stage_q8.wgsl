// The activation operand of a Q8_0 product, quantised the way llama.cpp's CPU backend quantises the input of a
// Q8_0 matrix (ggml quantize_row_q8_0, as the fixtures were made): per 32 values amax = max|x|, d = f16(amax / 127),
// q = round-half-even(x · (127 / amax)) in f32. Each workgroup stages its x once in workgroup memory; the weight
// kernels then multiply int8 codes with dot4I8Packed, which on a GPU runs 2-4x faster than converting every weight
// to f32 (the conversions, not the bytes, bounded the f32 kernels). The product is Σ_blocks (d_w · d_x) · Σ q_w q_x.
// The includer declares `x: array<vec4<f32>>`; every lane of the workgroup (wg_size lanes) must call stage_x before
// any lane returns. K ≤ 32 · XQ_BLOCKS columns.
var<private> x_v0: u32;                           // x's first vec4 (read directly by F32 weights)

#include "q8_block.wgsl"
#include "xq_staged.wgsl"

fn stage_x(tid: u32, wg_size: u32, xv0: u32, nb: u32) {
  x_v0 = xv0;
  for (var b = tid; b < nb; b += wg_size) {
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      v[i] = x[xv0 + b * 8u + i];
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}

// Quantise the 32 values v of block b into the staging arrays (callers other than stage_x, such as the fused
// RMSNorm of x_norm_rms.wgsl, stage values they computed themselves, then barrier).
fn x_store_block(b: u32, v: array<vec4<f32>, 8>) {
  let q = q8_block(v);
  xq_codes[2u * b] = vec4<u32>(q.codes[0], q.codes[1], q.codes[2], q.codes[3]);
  xq_codes[2u * b + 1u] = vec4<u32>(q.codes[4], q.codes[5], q.codes[6], q.codes[7]);
  xq_scale[b] = q.d;
}

// x as is, for an F32 part of a fused pair (its weights multiply unquantised activations, as llama.cpp's do).
fn x4(v: u32) -> vec4<f32> {
  return x[v];
}
