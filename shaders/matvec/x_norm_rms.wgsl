// RMSNorm fused into the staging of a product's input: xn = x / sqrt(mean(x²) + eps) * norm_w, stored by every
// workgroup into its staging (x_stage_q8.wgsl quantises it; x_stage_f32s.wgsl keeps it f32), so the separate
// rmsnorm dispatch (and its round trip through memory) goes away. The scale is rms_scale64.wgsl's (rmsnorm.wgsl's
// arithmetic), so the fused and unfused paths give the same bits. write_xn: this workgroup also stores xn (a later
// kernel, such as the shared expert or a residual path, reads it) as f32, and with XN = q8 also quantised ahead for
// a Q8_0 product (xn_store_q8.wgsl; XN = f32: xn_store_f32.wgsl, nothing more). Needs wg_size = 64.
@group(0) @binding(5) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> xn_out: array<vec4<f32>>;

#include "rms_scale64.wgsl"
#include "xn_store_{{XN}}.wgsl"

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  let inv = rms_scale64(tid, xv0, nb * 32u, eps);
  for (var b = tid; b < nb; b += wg_size) {
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      v[i] = x[xv0 + b * 8u + i] * inv * norm_w[b * 8u + i];
    }
    if (write_xn) {
      for (var i = 0u; i < 8u; i++) {
        xn_out[b * 8u + i] = v[i];
      }
      store_xn_q8(b, nb, v);
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
