// Routed-expert products: for each of the k selected experts (workgroup row wg.y = k index),
//   y[k * rows + r] = W_slot[r] · x_k,   slot = slot_map[map_base + route_ids[k]]
// where W_slot is the expert's matrix inside a pool of same-shaped matrices (rows per slot = rows), and x_k is
// x[x_base + k * x_stride ..] (x_stride = 0: every expert reads the same input, as gate/up do). ROWS rows per lane
// group (as matvec.wgsl): each workgroup quantises its x_k once for 64 / LANES · ROWS rows, so the routed down
// product (K = n_ff, thousands of small workgroups) does not spend its time restaging x.
struct Params { rows: u32, nb: u32, x_base: u32, x_stride: u32, map_base: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "x_stage_{{XFMT}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> route_ids: array<u32>;
@group(0) @binding(6) var<storage, read> slot_map: array<u32>;

const LANES: u32 = {{LANES}}u;
const ROWS: u32 = {{ROWS}}u;   // 1, 2 or 4 (one vec4 accumulator)
#include "row_reduce4.wgsl"

const WG: u32 = 64u;   // lanes per workgroup (and group_sum4.wgsl's tree)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let k = wg.y;
  let row0 = (wg.x * (WG / LANES) + lid.x / LANES) * ROWS;
  let lane = lid.x % LANES;
  let slot = slot_map[p.map_base + route_ids[k]];
  stage_x(lid.x, WG, (p.x_base + k * p.x_stride) / 4u, p.nb);   // Q8_0: x_k quantised as llama.cpp does
  let acc = rows_partial(row0, lane, slot * p.rows, p.rows, p.nb);
  let total = group_sum(acc, lid.x);
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      if (row0 + i < p.rows) {
        y[k * p.rows + row0 + i] = total[i];
      }
    }
  }
}
