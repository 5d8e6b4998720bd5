// Embedding lookup: y[0 .. n) = row `step.token` of the embedding matrix, dequantised (w_at, exact in f32), times
// p.scale (1 for the Qwen models, an exact no-op; gemma4's sqrt(n_embd): llama.cpp's ggml_get_rows then ggml_scale,
// the same two f32 roundings). The matrix may be split into row bands (one dispatch per band): a band holds rows
// [row_base, row_base + rows) and only writes if the token falls inside it.
#include "step.wgsl"
struct Params { n: u32, row_base: u32, rows: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "weights_{{WFMT}}.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let tok = step.token;
  if (i >= p.n || tok < p.row_base || tok >= p.row_base + p.rows) {
    return;
  }
  y[i] = w_at((tok - p.row_base) * p.n + i) * p.scale;
}
