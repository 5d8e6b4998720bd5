// A sigmoid gate fused into the staging of the product that follows it (qwen35moe's attention output:
// attention_output_gate.wgsl then attn_output, one dispatch): xn[e] = x[e] / (1 + exp(-g[e])) with
// g[e] = gate[p.g_base + h · p.g_stride + e % group] for e in head h (the gate half of each head's q projection),
// the same arithmetic as attention_output_gate.wgsl. Every workgroup stages it (x_stage_q8.wgsl / x_stage_f32s.wgsl).
// Heads are whole 32-blocks and the gate's base and stride multiples of 4 (read as vec4).
@group(0) @binding(6) var<storage, read> gate_src: array<vec4<f32>>;

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  let per = p.group / 32u;   // blocks per head
  for (var b = tid; b < nb; b += wg_size) {
    let h = b / per;
    let g0 = (p.g_base + h * p.g_stride) / 4u + (b - h * per) * 8u;
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      let g = gate_src[g0 + i];
      v[i] = x[xv0 + b * 8u + i] / (1.0 + exp(-g));
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
