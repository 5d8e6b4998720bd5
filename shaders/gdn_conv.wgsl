// Gated DeltaNet's causal depthwise convolution for one token, then SiLU (llama.cpp ggml_ssm_conv + ggml_silu).
// Channel c:  y[c] = silu(Σ_{j < K-1} window[j][c] · w[c][j]  +  x[c] · w[c][K-1])
// where window holds the previous K-1 inputs, oldest first (the sum runs oldest to newest, as ggml's does), and
// w is ssm_conv1d (GGUF ne (K, C): the K taps of a channel are contiguous). Then the window shifts by one token.
// Position 0 starts a sequence: the stored window is read as zeros, so a new sequence needs no clearing pass.
// One invocation per channel; a channel only touches its own column of the window (no races).
#include "step.wgsl"
struct Params { n: u32, k: u32, x_base: u32, y_base: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read_write> window: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

#include "gdn_conv_step.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  if (c >= p.n) {
    return;
  }
  y[p.y_base + c] = conv_silu_step(c, x[p.x_base + c], step.pos == 0u);
}
