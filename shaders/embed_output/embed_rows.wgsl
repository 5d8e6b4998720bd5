// Embedding lookup for a prefill chunk: y[t·n + i] = row ids[t] of the embedding matrix (dequantised) times p.scale
// (1, or gemma4's sqrt(n_embd): the same f32 product as embed.wgsl), t < chunk.n.
// Row bands as in embed.wgsl (one dispatch per band; a band writes the tokens that fall inside it).
#include "chunk.wgsl"
struct Params { n: u32, row_base: u32, rows: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "weights_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> ids: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= p.n || t >= chunk.n) {
    return;
  }
  let tok = ids[t];
  if (tok < p.row_base || tok >= p.row_base + p.rows) {
    return;
  }
  y[t * p.n + i] = w_at((tok - p.row_base) * p.n + i) * p.scale;
}
