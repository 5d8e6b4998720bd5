// silu(g) · u, the SwiGLU of the fused gate/up kernels (the same expression as shaders/silu_mul.wgsl).
fn silu_times(g: f32, u: f32) -> f32 {
  return g / (1.0 + exp(-g)) * u;
}
