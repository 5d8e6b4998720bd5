// A sigmoid gate fused into the staging of the product that follows it (qwen35moe's attention output:
// attn_output_gate.wgsl then attn_output, one dispatch): xn[e] = x[e] / (1 + exp(-g[e])) with
// g[e] = gate[p.g_base + (e / group) · p.g_stride + e % group] (the gate half of each head's q projection), the
// same arithmetic as attn_output_gate.wgsl. Every workgroup stages it (x_stage_q8.wgsl / x_stage_f32s.wgsl).
@group(0) @binding(6) var<storage, read> gate_src: array<f32>;

fn gate_at(e: u32) -> f32 {
  let h = e / p.group;
  return gate_src[p.g_base + h * p.g_stride + (e - h * p.group)];
}

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  for (var b = tid; b < nb; b += wg_size) {
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      let e = b * 32u + i * 4u;
      let g = vec4<f32>(gate_at(e), gate_at(e + 1u), gate_at(e + 2u), gate_at(e + 3u));
      v[i] = x[xv0 + b * 8u + i] / (1.0 + exp(-g));
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
