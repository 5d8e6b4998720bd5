// A decode token's attention inputs in one dispatch: per q head, RMSNorm with q_norm then NeoX RoPE
// (head_norm_rope.wgsl), read at x[h · q_stride] (q_stride = 2·hd: the query half of qwen35moe's [query | gate]
// heads) and written to q[h · hd]; per kv head, the same with k_norm, then K and V appended to the layer's cache
// at row step.pos (the cache layout of kv_append_rows.wgsl: [kv head][dim], 2 values per word). Replaces a q
// split, two per-head norm + RoPE passes and a KV append (one dispatch each) with the same arithmetic. Workgroups: n_head + n_kv_head, 64 lanes each.
#include "step.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params {
  hd: u32, n_rot: u32, eps: f32, base: f32, n_head: u32, n_kv: u32, q_stride: u32, k_base: u32,
  v_base: u32, use_norm: u32, pad0: u32, pad1: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> q_norm: array<f32>;
@group(0) @binding(3) var<storage, read> k_norm: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> q: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<KvWord>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<KvWord>;

var<private> k_head: bool;

fn norm_weight(i: u32) -> f32 {
  if (k_head) {
    return k_norm[i];
  }
  return q_norm[i];
}

#include "head_norm_rope.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let is_k = wg.x >= p.n_head;
  k_head = is_k;
  let j = wg.x - p.n_head;   // kv head (when is_k)
  var src = wg.x * p.q_stride;
  if (is_k) {
    src = p.k_base + j * p.hd;
  }
  for (var i = t; i < p.hd; i += 64u) {
    hv[i] = x[src + i];
  }
  norm_rope_head(t, p.hd, p.n_rot, p.eps, p.base, p.use_norm != 0u, f32(step.pos));
  if (!is_k) {
    for (var i = t; i < p.hd; i += 64u) {
      q[wg.x * p.hd + i] = hv[i];
    }
    return;
  }
  let half = p.hd / 2u;
  let row = step.pos * p.n_kv * half + j * half;
  let vb = p.v_base + j * p.hd;
  for (var m = t; m < half; m += 64u) {
    k_cache[row + m] = kv_pack(vec2<f32>(hv[2u * m], hv[2u * m + 1u]));
    v_cache[row + m] = kv_pack(vec2<f32>(x[vb + 2u * m], x[vb + 2u * m + 1u]));
  }
}
