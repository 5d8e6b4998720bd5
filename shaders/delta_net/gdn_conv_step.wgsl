// One channel's step of Gated DeltaNet's causal depthwise convolution + SiLU, shared by the one-token and the chunk
// kernels (the includer declares p.n (channels), p.k (taps K), w (ssm_conv1d, K taps of a channel contiguous) and
// window: the last K inputs as a ring, the input of position q in slot q % K, channel-minor):
//   y = silu(Σ_{j < K-1} x(pos - (K-1) + j) · w[c][j]  +  xc · w[c][K-1])     (oldest to newest, as ggml sums)
// where x(q) is the stored input of position q and 0 before position 0 (a sequence starts at 0: stale slots are
// never read, so a new sequence needs no clearing pass). The ring (not a shifted window) lets every workgroup of
// a dispatch read the previous inputs while one writes the current one: that goes to slot pos % K, which holds
// position pos - K, read by no one at this step.
// The taps' loads are issued TAPS_AHEAD at a time before their products are added (in the same order): a loop that
// adds each load before it issues the next waits for them in turn.
const TAPS_AHEAD: u32 = 4u;

fn conv_silu_at(c: u32, xc: f32, pos: u32) -> f32 {
  var acc = 0.0;
  for (var j0 = 0u; j0 + 1u < p.k; j0 += TAPS_AHEAD) {
    var prev: array<f32, TAPS_AHEAD>;
    var wt: array<f32, TAPS_AHEAD>;
    for (var u = 0u; u < TAPS_AHEAD; u++) {
      let j = j0 + u;
      prev[u] = 0.0;
      wt[u] = 0.0;
      if (j + 1u < p.k) {
        let back = p.k - 1u - j;  // positions before this one
        if (pos >= back) {
          prev[u] = window[((pos - back) % p.k) * p.n + c];
        }
        wt[u] = w[c * p.k + j];
      }
    }
    for (var u = 0u; u < TAPS_AHEAD; u++) {
      if (j0 + u + 1u < p.k) {
        acc += prev[u] * wt[u];
      }
    }
  }
  acc += xc * w[c * p.k + p.k - 1u];
  return acc / (1.0 + exp(-acc));
}

// Keeps position pos's input of channel c for the next K - 1 positions.
fn conv_keep(c: u32, xc: f32, pos: u32) {
  window[(pos % p.k) * p.n + c] = xc;
}
