// How the workgroup of a fused RMSNorm that is asked to (x_norm_rms.wgsl's write_xn) leaves the normalised input
// for the kernels after it: block b's 32 values as f32, at xn_out[8b ..] (vec4s).
fn store_xn_block(b: u32, nb: u32, v: array<vec4<f32>, 8>) {
  for (var i = 0u; i < 8u; i++) {
    xn_out[b * 8u + i] = v[i];
  }
}
