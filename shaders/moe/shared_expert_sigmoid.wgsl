// The shared expert's gate of qwen35moe: sigmoid(Σ_j w[j] · x[x_at + j]) over the n values of one token, computed
// by the whole workgroup of 256 (workgroup_sum.wgsl; no subgroups); every lane gets it. The includer declares p.n,
// x, w (ffn_gate_inp_shexp, F32) and `const SUM_LANES: u32 = 256u`.
#include "workgroup_sum.wgsl"

fn shexp_gate(t: u32, x_at: u32) -> f32 {
  var acc = 0.0;
  for (var j = t; j < p.n; j += 256u) {
    acc += w[j] * x[x_at + j];
  }
  return 1.0 / (1.0 + exp(-workgroup_sum(acc, t)));
}
