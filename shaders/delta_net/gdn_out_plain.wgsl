// gdn_conv_recurrent.wgsl's output as is: o (the gated RMSNorm after it runs in the next product's staging,
// x_norm_gated.wgsl, or in gdn_gated_norm.wgsl).
const OUT_SQ: bool = false;

fn out_weight(h: u32, j: u32) -> f32 {
  return 1.0;
}

fn out_sq(h: u32, part: u32, sq: f32) {}
