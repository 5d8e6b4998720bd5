// The staging of a fused RMSNorm once its scale is known (x_norm_rms.wgsl takes it from a pass over x,
// x_norm_rmsparts.wgsl from the sums of squares the product before it left): xn = x · inv · norm_w, stored into the
// product's staging, and by the workgroup asked to (write_xn) also into xn_out (and, with XN = q8, quantised ahead:
// xn_store_q8.wgsl). The includer declares x, norm_w, xn_out and includes x_stage_*.wgsl and xn_store_{{XN}}.wgsl.
fn stage_scaled(tid: u32, wg_size: u32, xv0: u32, nb: u32, inv: f32, write_xn: bool) {
  x_v0 = xv0;
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
