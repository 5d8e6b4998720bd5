// Embedding lookup through the row cache: y[0 .. n) = row `step.token` of the token table, from the slot the cache
// holds it in (embed_cached_q8.wgsl), dequantised. One dispatch per plane of the cache (a shader cannot index a
// variable number of bindings); each writes only if the row's slot lies in its plane. An absent row (the host did
// not look it up first) comes out as zeros from the plane-0 dispatch.
#include "step.wgsl"
struct Params {
  n: u32,
  stride_words: u32,
  scales_word: u32,
  slots_per_plane: u32,
  plane: u32,
  table_rows: u32,
  pad0: u32,
  pad1: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "embed_cached_q8.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n) {
    return;
  }
  let slot = cached_slot(step.token);
  if (slot == ABSENT_ROW) {
    if (p.plane == 0u) {
      y[i] = 0.0;
    }
    return;
  }
  if (slot / p.slots_per_plane != p.plane) {
    return;
  }
  y[i] = cached_at(slot, i);
}
