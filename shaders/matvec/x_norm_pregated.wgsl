// The DeltaNet's gated RMSNorm fused into the output product's staging when the recurrence has already applied the
// per-value factors (gdn_conv_recurrent.wgsl with gdn_out_pregated.wgsl): x holds o · norm_w · silu(z) and
// sq_parts p.g_stride partial sums of o² per head (p.group values), so xn[e] = x[e] / sqrt(Σ partials of e's head
// / group + eps). Each lane of a block loads the block and its head's partials together and stages it: one step and
// one barrier, where x_norm_gated.wgsl takes a pass over x for the sums, a barrier, then the block. Heads are whole
// 32-blocks; p.g_stride a multiple of 4, at most 64 (read as vec4: qwen35_kernels.pregated_norm_fits checks).
@group(0) @binding(6) var<storage, read> sq_parts: array<vec4<f32>>;

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  let per = p.group / 32u;   // blocks per head
  for (var b = tid; b < nb; b += wg_size) {
    let h = b / per;
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      v[i] = x[xv0 + b * 8u + i];
    }
    var s4 = vec4<f32>(0.0);
    for (var i = 0u; i < 16u; i++) {   // a constant count: unrolled, the loads issued with the block's
      if (4u * i < p.g_stride) {
        s4 += sq_parts[h * (p.g_stride / 4u) + i];
      }
    }
    let inv = 1.0 / sqrt((s4.x + s4.y + s4.z + s4.w) / f32(p.group) + eps);
    for (var i = 0u; i < 8u; i++) {
      v[i] = v[i] * inv;
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
