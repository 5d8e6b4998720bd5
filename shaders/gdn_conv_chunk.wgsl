// Gated DeltaNet's causal conv + SiLU over a prefill chunk (gdn_conv_step.wgsl applied to rows t = 0 .. chunk.n - 1 in
// order, in one dispatch): each invocation owns one channel and walks the chunk's tokens, keeping each input in its
// ring slot as it goes. Inputs before position 0 read as zeros (a row at position 0 starts a sequence).
#include "chunk.wgsl"
struct Params { n: u32, k: u32, x_stride: u32, y_stride: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
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
  for (var r = 0u; r < chunk.n; r++) {
    let xc = x[r * p.x_stride + c];
    y[r * p.y_stride + c] = conv_silu_at(c, xc, chunk.pos0 + r);
    conv_keep(c, xc, chunk.pos0 + r);
  }
}
