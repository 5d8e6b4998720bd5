// The chunk's last row in use (row chunk.n - 1 of x, rows of n values) copied into y: the prompt's last token's
// hidden state for the output head (prefill.py's head list), wherever the prompt's last chunk ended.
#include "chunk.wgsl"
struct Params { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i < p.n && chunk.n > 0u) {
    y[i] = x[(chunk.n - 1u) * p.n + i];
  }
}
