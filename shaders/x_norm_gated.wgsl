// Gated RMSNorm (gdn_gated_norm.wgsl) fused into the staging of the product that follows it (ssm_out), so the
// norm's dispatch and its round trip through memory go away. Per group (value head) of p.group values:
//   xn[e] = x[e] / sqrt(mean over the group of x² + eps) · norm_w[e % group] · silu(g[e])
// with g[e] = gate[p.g_base + (e / group) · p.g_stride + e % group]. Every workgroup stages it (x_stage_q8.wgsl
// quantises it; x_stage_f32s.wgsl keeps it f32). Groups are whole 32-blocks (group % 32 == 0): each block's sum
// of squares is taken once, then summed per group.
@group(0) @binding(5) var<storage, read> norm_w: array<f32>;
@group(0) @binding(6) var<storage, read> gate_src: array<f32>;

var<workgroup> block_sq: array<f32, 256>;

fn gate_at(e: u32) -> f32 {
  let h = e / p.group;
  return gate_src[p.g_base + h * p.g_stride + (e - h * p.group)];
}

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
  let per = p.group / 32u;
  for (var b = tid; b < nb; b += wg_size) {
    let b0 = b / per * per;
    var sq = 0.0;
    for (var i = 0u; i < per; i++) {
      sq += block_sq[b0 + i];
    }
    let inv = 1.0 / sqrt(sq / f32(p.group) + eps);
    let j0 = (b - b0) * 32u;
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      let e = b * 32u + i * 4u;
      let g = vec4<f32>(gate_at(e), gate_at(e + 1u), gate_at(e + 2u), gate_at(e + 3u));
      let j = j0 + i * 4u;
      let w = vec4<f32>(norm_w[j], norm_w[j + 1u], norm_w[j + 2u], norm_w[j + 3u]);
      v[i] = x[xv0 + b * 8u + i] * inv * w * (g / (1.0 + exp(-g)));
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
