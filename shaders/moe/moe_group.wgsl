// Groups a chunk's routed picks by expert for moe_gemm.wgsl. Pick i = t · k + j is token t's j-th expert
// (route_ids[i]); out = counts[n_exp] | offsets[n_exp] | the picks of expert 0, then of expert 1, ... The order of
// picks inside an expert is whatever the atomics give: each pick's output row is computed on its own, so the
// results do not depend on it. One workgroup of 256; n_exp <= 256.
#include "chunk.wgsl"
struct Params { k: u32, n_exp: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> route_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

var<workgroup> cnt: array<atomic<u32>, 256>;
var<workgroup> off: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  atomicStore(&cnt[t], 0u);
  workgroupBarrier();
  let total = chunk.n * p.k;
  for (var i = t; i < total; i += 256u) {
    atomicAdd(&cnt[min(route_ids[i], 255u)], 1u);
  }
  workgroupBarrier();
  // offsets: an exclusive prefix sum of the counts, in 8 parallel steps (one lane walking 256 counts was most of
  // this dispatch at 4096 picks)
  let c = select(0u, atomicLoad(&cnt[t]), t < p.n_exp);
  off[t] = c;
  workgroupBarrier();
  for (var d = 1u; d < 256u; d <<= 1u) {
    var add = 0u;
    if (t >= d) {
      add = off[t - d];
    }
    workgroupBarrier();
    off[t] += add;
    workgroupBarrier();
  }
  off[t] -= c;  // inclusive -> exclusive
  workgroupBarrier();
  if (t < p.n_exp) {
    out[t] = atomicLoad(&cnt[t]);
    out[p.n_exp + t] = off[t];
  }
  workgroupBarrier();
  atomicStore(&cnt[t], 0u);
  workgroupBarrier();
  for (var i = t; i < total; i += 256u) {
    let id = min(route_ids[i], 255u);
    let at = atomicAdd(&cnt[id], 1u);
    out[2u * p.n_exp + off[id] + at] = i;
  }
}
