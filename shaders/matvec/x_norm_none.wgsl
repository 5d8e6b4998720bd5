// No norm before the product: stage x as is (x_norm_rms.wgsl is the fused alternative, same interface).
fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  stage_x(tid, wg_size, xv0, nb);
}
