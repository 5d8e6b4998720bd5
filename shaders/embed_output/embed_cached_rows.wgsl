// Embedding lookup of a prefill chunk through the row cache: y[t·n + i] = row ids[t] of the token table, t < chunk.n,
// from the slot the cache holds it in (embed_cached_q8.wgsl). Planes and absent rows as in embed_cached.wgsl.
#include "chunk.wgsl"
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
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "embed_cached_q8.wgsl"
@group(0) @binding(5) var<storage, read> ids: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= p.n || t >= chunk.n) {
    return;
  }
  let slot = cached_slot(ids[t]);
  if (slot == ABSENT_ROW) {
    if (p.plane == 0u) {
      y[t * p.n + i] = 0.0;
    }
    return;
  }
  if (slot / p.slots_per_plane != p.plane) {
    return;
  }
  y[t * p.n + i] = cached_at(slot, i);
}
