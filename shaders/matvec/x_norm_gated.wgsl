// Gated RMSNorm (gdn_gated_norm.wgsl) fused into the staging of the product that follows it (ssm_out), so the
// norm's dispatch and its round trip through memory go away. Per group (value head) h of p.group values:
//   xn[e] = x[e] / sqrt(mean over the group of x² + eps) · norm_w[e % group] · silu(g[e])
// with g[e] = gate[p.g_base + h · p.g_stride + e % group]. Every workgroup stages it (x_stage_q8.wgsl quantises
// it; x_stage_f32s.wgsl keeps it f32). Groups are whole 32-blocks and the gate's base and stride multiples of 4
// (qwen35_kernels.gated_norm_product checks): each block's sum of squares is taken once, then summed per group,
// and everything is read as vec4.
@group(0) @binding(5) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> gate_src: array<vec4<f32>>;

var<workgroup> block_sq: array<f32, {{STAGED_BLOCKS}}>;   // per block of the input (the pipeline's blocks)

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  for (var b = tid; b < nb; b += wg_size) {
    var acc = 0.0;
    for (var i = 0u; i < 8u; i++) {
      let v = x[xv0 + b * 8u + i];
      acc += dot(v, v);
    }
    block_sq[b] = acc;
  }
  workgroupBarrier();
  let per = p.group / 32u;   // blocks per group
  for (var b = tid; b < nb; b += wg_size) {
    let h = b / per;
    var sq = 0.0;
    for (var i = 0u; i < per; i++) {
      sq += block_sq[h * per + i];
    }
    let inv = 1.0 / sqrt(sq / f32(p.group) + eps);
    let j0 = (b - h * per) * 8u;                       // the block's first vec4 within its group
    let g0 = (p.g_base + h * p.g_stride) / 4u + j0;
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      let g = gate_src[g0 + i];
      v[i] = x[xv0 + b * 8u + i] * inv * norm_w[j0 + i] * (g / (1.0 + exp(-g)));
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
