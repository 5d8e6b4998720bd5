// One channel's step of Gated DeltaNet's causal depthwise convolution + SiLU, shared by the one-token and the chunk
// kernels (the includer declares p.n (channels), p.k (taps), w (ssm_conv1d, K taps of a channel contiguous) and
// window (the previous K-1 inputs, oldest first, channel-minor)):
//   y = silu(Σ_{j < K-1} window[j][c] · w[c][j]  +  xc · w[c][K-1])     (oldest to newest, as ggml sums)
// then the window shifts by one token. `fresh` (position 0) reads the stored window as zeros.
fn conv_silu_step(c: u32, xc: f32, fresh: bool) -> f32 {
  let taps = p.k - 1u;
  var acc = 0.0;
  for (var j = 0u; j < taps; j++) {
    var prev = 0.0;
    if (!fresh) {
      prev = window[j * p.n + c];
    }
    acc += prev * w[c * p.k + j];
    if (j > 0u) {
      window[(j - 1u) * p.n + c] = prev;   // shift: the oldest input drops out
    }
  }
  acc += xc * w[c * p.k + taps];
  if (taps > 0u) {
    window[(taps - 1u) * p.n + c] = xc;
  }
  return acc / (1.0 + exp(-acc));
}
