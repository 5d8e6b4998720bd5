// The activation operand read as f32 (as x_stage_f32.wgsl) but from a copy staged in workgroup memory: the
// staging a fused RMSNorm needs (x_norm_rms.wgsl stores the normalised values through x_store_block), so an
// f32-activation product can take its norm in the same dispatch. K <= 4 · XS_VECS columns (STAGED_BLOCKS: the
// pipeline's blocks, at most 64; sized to them as xq_staged.wgsl is).
const XS_VECS: u32 = 8u * {{STAGED_BLOCKS}}u;
var<workgroup> xs: array<vec4<f32>, XS_VECS>;
var<private> x_v0: u32;   // x's first vec4: x4(v) reads staged value v - x_v0

fn stage_x(tid: u32, wg_size: u32, xv0: u32, nb: u32) {
  x_v0 = xv0;
  for (var v = tid; v < nb * 8u; v += wg_size) {
    xs[v] = x[xv0 + v];
  }
  workgroupBarrier();
}

fn x_store_block(b: u32, v: array<vec4<f32>, 8>) {
  for (var i = 0u; i < 8u; i++) {
    xs[b * 8u + i] = v[i];
  }
}

fn x4(v: u32) -> vec4<f32> {
  return xs[v - x_v0];
}

// A Q8_0 block times the staged f32 activations (the f32-activation mode).
#include "xq_dot_f32.wgsl"
