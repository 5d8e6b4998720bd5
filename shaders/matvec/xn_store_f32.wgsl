// x_norm_rms.wgsl's XN = f32: the workgroup asked to leave xn (write_xn) stores it as f32 only, nothing more.
fn store_xn_q8(b: u32, nb: u32, v: array<vec4<f32>, 8>) {}
