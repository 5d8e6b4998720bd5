// Append this token's K and V (n = n_kv_heads * head_dim values each) to the layer's cache at row step.pos.
// Cache row layout: [kv head][dim], 2 values per word (KV = f16 | f32).
#include "step.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params { n: u32, k_base: u32, v_base: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> src: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<KvWord>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = gid.x;
  let half = p.n / 2u;
  if (j >= half) {
    return;
  }
  let row = step.pos * half;
  k_cache[row + j] = kv_pack(src[p.k_base / 2u + j]);
  v_cache[row + j] = kv_pack(src[p.v_base / 2u + j]);
}
