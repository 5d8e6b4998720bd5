// y[y_base + r] (+)= W[r] · x[x_base ..]  for rows r < rows of one weight matrix (or one row band of it).
// Weights: Q8_0 planes or F32 (WFMT = q8 | f32). LANES lanes share a group of ROWS consecutive rows
// (WG / LANES groups per workgroup); each lane takes every LANES-th 32-column block of each of those rows.
// Q8_0 weights multiply x quantised per 32-block as llama.cpp does (x_stage_q8.wgsl: staged once per workgroup,
// int8 dot products); F32 weights multiply x as is. ROWS > 1 (tall matrices such as the output head) gives each
// lane group ROWS consecutive rows (fewer, fuller workgroups). ACCUMULATE adds onto y (a residual add fused into
// the product). NORM = rms fuses the RMSNorm that precedes the product into the staging (x_norm_rms.wgsl: x is
// normalised per workgroup with p.eps; p.xn_write asks workgroup (0, 0) to store the normalised values); gated
// and sgate fuse a gated per-head RMSNorm or a sigmoid gate read from a second input (x_norm_gated.wgsl,
// x_norm_sgate.wgsl: p.group values per head, gate values at p.g_base + head · p.g_stride); none stages x as is.
// ARGMAX = parts: each workgroup also stores the largest of the values it wrote and its index (y_base + row, ties to
// the lower) as partial p.part_base + workgroup for argmax_final.wgsl (the output head: no argmax pass over the
// logits); none: nothing more.
struct Params {
  rows: u32, nb: u32, x_base: u32, y_base: u32, eps: f32, xn_write: u32, group: u32, g_base: u32,
  g_stride: u32, part_base: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "x_stage_{{XFMT}}.wgsl"
#include "x_norm_{{NORM}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"
#include "row_argmax_{{ARGMAX}}.wgsl"

const LANES: u32 = {{LANES}}u;
const ROWS: u32 = {{ROWS}}u;   // 1, 2 or 4 (one vec4 accumulator)
const ACCUMULATE: bool = {{ACCUMULATE}};
// Lanes per workgroup: 64, or 256 where the staging is a gated input's (kernels.py: matvec_workgroup), whose
// per-head work over all of x then serves 4x the rows.
const WG: u32 = {{WG}}u;

#include "row_reduce4.wgsl"

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let g = wg.y * ng.x + wg.x;
  let row0 = (g * (WG / LANES) + lid.x / LANES) * ROWS;
  let lane = lid.x % LANES;
  var y_old = vec4<f32>(0.0);   // read before the work, not after it: the load's latency then overlaps the product
  if (ACCUMULATE && lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      y_old[i] = y[p.y_base + min(row0 + i, p.rows - 1u)];
    }
  }
  stage_input(lid.x, WG, p.x_base / 4u, p.nb, p.eps, p.xn_write != 0u && wg.x == 0u && wg.y == 0u);
  let acc = rows_partial(row0, lane, 0u, p.rows, p.nb);
  let total = group_sum(acc, lid.x);
  var vals = total;
  if (ACCUMULATE) {
    vals = y_old + total;
  }
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      let r = row0 + i;
      if (r < p.rows) {
        y[p.y_base + r] = vals[i];
      }
    }
  }
  store_row_argmax(g, lid.x, row0, vals);
}
