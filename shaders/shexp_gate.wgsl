// The shared expert's gate of qwen35moe: sigmoid(Σ_j w[j] · x[x_at + j]) over the n values of one token, computed
// by the whole workgroup of 256 with a tree reduction in `red` (no subgroups); every lane gets it. The includer
// declares p.n, x, w (ffn_gate_inp_shexp, F32) and `red: array<f32, 256>` in workgroup memory.
fn shexp_gate(t: u32, x_at: u32) -> f32 {
  var acc = 0.0;
  for (var j = t; j < p.n; j += 256u) {
    acc += w[j] * x[x_at + j];
  }
  red[t] = acc;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (t < s) {
      red[t] += red[t + s];
    }
    workgroupBarrier();
  }
  return 1.0 / (1.0 + exp(-red[0]));
}
