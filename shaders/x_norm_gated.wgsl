// Gated RMSNorm (gdn_gated_norm.wgsl) fused into the staging of the product that follows it (ssm_out), so the
// norm's dispatch and its round trip through memory go away. Per group (value head) h of p.group values:
//   xn[e] = x[e] / sqrt(mean over the group of x² + eps) · norm_w[e % group] · silu(g[e])
// with g[e] = gate[p.g_base + h · p.g_stride + e % group]. Every workgroup stages it (x_stage_q8.wgsl quantises
// it; x_stage_f32s.wgsl keeps it f32). Groups are whole 32-blocks and the gate's base and stride multiples of 4
// (qwen35_kernels.gated_norm_product checks): each block's sum of squares is taken once, then summed per group,
// and everything is read as vec4.
@group(0) @binding(5) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> gate_src: array<vec4<f32>>;

var<workgroup> block_sq: array<f32, 256>;

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  // Two of the lane's blocks per step where x is wider than the workgroup's lanes (ssm_out: 128 blocks), both
  // loaded before either is summed or staged: one memory round trip for two blocks.
  var b = tid;
  for (; b + wg_size < nb; b += 2u * wg_size) {
    var acc0 = 0.0;
    var acc1 = 0.0;
    for (var i = 0u; i < 8u; i++) {
      let v0 = x[xv0 + b * 8u + i];
      let v1 = x[xv0 + (b + wg_size) * 8u + i];
      acc0 += dot(v0, v0);
      acc1 += dot(v1, v1);
    }
    block_sq[b] = acc0;
    block_sq[b + wg_size] = acc1;
  }
  if (b < nb) {
    var acc = 0.0;
    for (var i = 0u; i < 8u; i++) {
      let v = x[xv0 + b * 8u + i];
      acc += dot(v, v);
    }
    block_sq[b] = acc;
  }
  workgroupBarrier();
  b = tid;
  for (; b + wg_size < nb; b += 2u * wg_size) {
    let v0 = gated_block(b, xv0, eps);
    let v1 = gated_block(b + wg_size, xv0, eps);
    x_store_block(b, v0);
    x_store_block(b + wg_size, v1);
  }
  if (b < nb) {
    x_store_block(b, gated_block(b, xv0, eps));
  }
  workgroupBarrier();
}

// Block b of xn, from the groups' sums of squares in block_sq.
fn gated_block(b: u32, xv0: u32, eps: f32) -> array<vec4<f32>, 8> {
  let per = p.group / 32u;   // blocks per group
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
  return v;
}
