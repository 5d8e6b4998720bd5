// After gdn_conv_chunk.wgsl: the chunk's last K inputs of each channel into the conv's ring (position q in slot q % K,
// gdn_conv_step.wgsl), what the next chunk or token reads. One invocation per channel; workgroups ceil(n / 256).
#include "chunk.wgsl"
struct Params { n: u32, k: u32, x_stride: u32, y_stride: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> window: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  if (c >= p.n) {
    return;
  }
  for (var r = select(0u, chunk.n - p.k, chunk.n > p.k); r < chunk.n; r++) {
    window[((chunk.pos0 + r) % p.k) * p.n + c] = x[r * p.x_stride + c];
  }
}
