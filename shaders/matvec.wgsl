// y[y_base + r] (+)= W[r] · x[x_base ..]  for rows r < rows of one weight matrix (or one row band of it).
// Weights: Q8_0 planes or F32 (WFMT = q8 | f32). LANES lanes share a row (64 / LANES rows per workgroup); each lane
// takes every LANES-th 32-column block. ACCUMULATE adds onto y (a residual add fused into the product).
struct Params { rows: u32, nb: u32, x_base: u32, y_base: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"

const LANES: u32 = {{LANES}}u;
const ACCUMULATE: bool = {{ACCUMULATE}};
#include "row_reduce.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = (wg.y * ng.x + wg.x) * (64u / LANES) + lid.x / LANES;
  let lane = lid.x % LANES;
  var acc = 0.0;
  if (row < p.rows) {
    let xv = p.x_base / 4u;
    for (var b = lane; b < p.nb; b += LANES) {
      acc += block_dot(row * p.nb + b, xv + b * 8u);
    }
  }
  let total = row_sum(acc, lid.x);
  if (lane == 0u && row < p.rows) {
    if (ACCUMULATE) {
      y[p.y_base + row] += total;
    } else {
      y[p.y_base + row] = total;
    }
  }
}
