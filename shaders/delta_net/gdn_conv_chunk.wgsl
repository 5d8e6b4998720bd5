// Gated DeltaNet's causal conv + SiLU over a prefill chunk: one invocation per (channel, row), all rows at once. Row r
// reads the inputs of the K - 1 positions before it from the chunk's own rows where they are in the chunk, else from
// the ring the previous chunk or tokens left (gdn_conv_step.wgsl's layout: position q in slot q % K; zeros before
// position 0), and sums the taps in gdn_conv_step's order (the same bits as stepping the rows one by one). The ring
// is not written here (other rows still read it): gdn_conv_keep.wgsl stores the chunk's last inputs after.
// Workgroups: (ceil(n / 256), T).
#include "chunk.wgsl"
struct Params { n: u32, k: u32, x_stride: u32, y_stride: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> window: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  let r = gid.y;
  if (c >= p.n || r >= chunk.n) {
    return;
  }
  let pos = chunk.pos0 + r;
  var acc = 0.0;
  for (var j = 0u; j + 1u < p.k; j++) {
    let back = p.k - 1u - j;  // positions before this one
    var prev = 0.0;
    if (r >= back) {
      prev = x[(r - back) * p.x_stride + c];
    } else if (pos >= back) {
      prev = window[((pos - back) % p.k) * p.n + c];
    }
    acc += prev * w[c * p.k + j];
  }
  acc += x[r * p.x_stride + c] * w[c * p.k + p.k - 1u];
  y[r * p.y_stride + c] = acc / (1.0 + exp(-acc));
}
