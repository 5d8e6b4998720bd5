// Ahead of the chunk's DeltaNet recurrence (gdn_recurrent_cols.wgsl), for every row and key head at once: the L2
// scales of q and k (load_qk of gdn_qk_norm.wgsl; the one-token kernel takes the same sums in its column sums, in
// another order) and q·k of the raw rows, out[(row · n_k_heads + kh)] = (q_scale, k_scale, q·k, 0). The
// recurrence then needs no reduction over the key rows but its column sums. Workgroups: (n_k_heads, T).
#include "chunk.wgsl"
struct Params { n_k_heads: u32, dk: u32, q_base: u32, k_base: u32, qkv_stride: u32, eps: f32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

fn qkv_at(e: u32) -> f32 {
  return qkv[e];
}

#include "gdn_lanes.wgsl"
var<workgroup> red_q: array<f32, WG>;
var<workgroup> red_k: array<f32, WG>;
#include "gdn_qk_norm.wgsl"
const SUM_LANES: u32 = WG;
#include "workgroup_sum.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let kh = wg.x;
  let row = wg.y;
  if (row >= chunk.n) {
    return;
  }
  let xb = row * p.qkv_stride;
  let scales = load_qk(t, xb + p.q_base + kh * p.dk, xb + p.k_base + kh * p.dk);
  var qk = 0.0;
  for (var i = t; i < p.dk; i += WG) {
    qk += q_sh[i] * k_sh[i];
  }
  qk = workgroup_sum(qk, t);
  if (t == 0u) {
    out[row * p.n_k_heads + kh] = vec4<f32>(scales.x, scales.y, qk, 0.0);
  }
}
