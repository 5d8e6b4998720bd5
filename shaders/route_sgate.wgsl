// A dense pair of moe_gate_up.wgsl (ROUTED = false, k = 1) that is qwen35moe's shared expert: its first workgroup
// also stores the expert's gate g = sigmoid(gate_w · x) after the pair's outputs, at act[act_base + rows], for
// moe_down_combine.wgsl. The dot is shexp_down_combine.wgsl's shared_gate (four neighbouring values per lane and
// step, the 64-lane tree), so g has its bits. x is the block's normed input (moe_gate_up's binding 1).
@group(0) @binding(5) var<storage, read> gate_w: array<f32>;   // ffn_gate_inp_shexp (F32), p.nb * 32 values

const SUM_LANES: u32 = 64u;
#include "workgroup_sum.wgsl"

fn routed_expert(kk: u32, t: u32, writer: bool) -> u32 {
  return 0u;
}

fn store_shared_gate(first: bool, t: u32) {
  if (first) {
    let n = p.nb * 32u;
    var acc = 0.0;
    for (var j = 4u * t; j < n; j += 256u) {
      let xv = x[j / 4u];
      for (var c = 0u; c < 4u; c++) {   // a constant count: unrolled, the loads issued together
        if (j + c < n) {
          acc += gate_w[j + c] * xv[c];
        }
      }
    }
    let g = 1.0 / (1.0 + exp(-workgroup_sum(acc, t)));
    if (t == 0u) {
      act[p.act_base + p.rows] = g;
    }
  }
}
