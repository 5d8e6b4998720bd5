// Append a prefill chunk's K and V rows to the layer's cache: token t < chunk.n goes to cache row pos0 + t; its K
// starts at src[t·src_stride + k_base], its V at src[t·src_stride + v_base] (n values each).
#include "chunk.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params { n: u32, k_base: u32, v_base: u32, src_stride: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> src: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<KvWord>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = gid.x;
  let t = gid.y;
  let half = p.n / 2u;
  if (j >= half || t >= chunk.n) {
    return;
  }
  let row = (chunk.pos0 + t) * half;
  let s = (t * p.src_stride) / 2u;
  k_cache[row + j] = kv_pack(src[s + p.k_base / 2u + j]);
  v_cache[row + j] = kv_pack(src[s + p.v_base / 2u + j]);
}
