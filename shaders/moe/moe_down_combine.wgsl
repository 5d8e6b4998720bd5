// The end of a MoE FFN block in one pass: the k routed experts' down products, with SHARED also the shared expert's
// (qwen35moe), and the block's sums into h:
//   h[r] = h[r] + Σ_k route_w[k] · (D_slot(k)[r] · a_k)  [+ g · (D_shared[r] · a_shared)]
// slot = slot_map[map_base + route_ids[k]]; the ids and weights (f32 bits) are read from `route` (route_layout:
// moe_route_gate_up.wgsl stored them there). The shared expert is slot p.shared_slot of the same pool (stacked
// after the routed experts at load), g = sigmoid(route[p.gate_at]) (its gate's logit: the router's last row).
// act (binding 1) holds a_0 .. a_{k-1} (n_ff values each), then a_shared.
// Each (row, expert) dot adds the same blocks in the same order as moe_matvec.wgsl's (row_reduce4's rows_partial,
// summed by its group_sum's tree) and the routed sums are added in moe_combine.wgsl's order, so without a shared
// expert the result has the bits of those two dispatches (at the same lane count). Every workgroup stages all the
// experts' activations (quantised per 32-block for Q8_0 weights) for its WG / LANES · ROWS rows.
struct Params { rows: u32, nb: u32, k: u32, map_base: u32, ids_base: u32, w_base: u32, shared_slot: u32, gate_at: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;       // act: a_0 .. a_{k-1} | a_shared
@group(0) @binding(2) var<storage, read_write> h: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "x_stage_{{XFMT}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> route: array<u32>;
@group(0) @binding(6) var<storage, read> slot_map: array<u32>;

const LANES: u32 = {{LANES}}u;
const ROWS: u32 = {{ROWS}}u;          // rows per lane group
const SHARED: bool = {{SHARED}};
const N_E: u32 = {{N_E}}u;            // the experts summed: p.k, + 1 with SHARED
const WG: u32 = {{WG}}u;              // lanes per workgroup: WG / LANES row groups share one staging
var<workgroup> red: array<f32, WG * N_E * ROWS>;   // [expert][row][lane] partials, summed in place

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let row0 = ((wg.y * ng.x + wg.x) * (WG / LANES) + t / LANES) * ROWS;
  let lane = t % LANES;
  var h_old = vec4<f32>(0.0);   // loaded first: its latency overlaps the staging and the products
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      h_old[i] = h[min(row0 + i, p.rows - 1u)];
    }
  }
  // every expert's slot first: N_E independent loads in flight together
  var slots: array<u32, N_E>;
  for (var e = 0u; e < N_E; e++) {
    var slot = p.shared_slot;
    if (e < p.k) {
      slot = slot_map[p.map_base + route[p.ids_base + e]];
    }
    slots[e] = slot;
  }
  stage_x(t, WG, 0u, N_E * p.nb);
  if (row0 < p.rows) {
    // The experts inside the lane's block loop (constant trip counts, unrolled): each step's N_E · ROWS block
    // loads are independent, so they are in flight together instead of one expert's round trip after another's
    // (on the H200 the 8 dispatches took 114-115 -> 91 µs per token in the decode's pass:
    // docs/results/2026-12-05-h200-in-pass-costs.json). Each (expert, row) still adds its blocks in rows_partial's
    // order: the same sums.
    var acc: array<vec4<f32>, N_E>;
    for (var b = lane; b < p.nb; b += LANES) {
      for (var e = 0u; e < N_E; e++) {
        for (var i = 0u; i < ROWS; i++) {
          acc[e][i] += block_dot_q((slots[e] * p.rows + min(row0 + i, p.rows - 1u)) * p.nb + b, e * p.nb + b);
        }
      }
    }
    for (var e = 0u; e < N_E; e++) {
      for (var i = 0u; i < ROWS; i++) {
        red[(e * ROWS + i) * WG + t] = acc[e][i];
      }
    }
  }
  workgroupBarrier();
  // the tree of group_sum4.wgsl's group_sum (two levels per barrier), for every (expert, row) at once
  var s = LANES / 2u;
  for (; s > 1u; s >>= 2u) {
    let h = s / 2u;
    if (lane < h && row0 < p.rows) {
      for (var e = 0u; e < N_E; e++) {
        for (var i = 0u; i < ROWS; i++) {
          let at = (e * ROWS + i) * WG + t;
          red[at] = (red[at] + red[at + s]) + (red[at + h] + red[at + h + s]);
        }
      }
    }
    workgroupBarrier();
  }
  if (s == 1u) {
    if (lane == 0u && row0 < p.rows) {
      for (var e = 0u; e < N_E; e++) {
        for (var i = 0u; i < ROWS; i++) {
          let at = (e * ROWS + i) * WG + t;
          red[at] += red[at + 1u];
        }
      }
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    var g = 0.0;
    if (SHARED) {
      g = 1.0 / (1.0 + exp(-bitcast<f32>(route[p.gate_at])));
    }
    for (var i = 0u; i < ROWS; i++) {
      let r = row0 + i;
      if (r < p.rows) {
        var routed = 0.0;
        for (var e = 0u; e < p.k; e++) {
          routed += bitcast<f32>(route[p.w_base + e]) * red[(e * ROWS + i) * WG + t];
        }
        if (SHARED) {
          h[r] = h_old[i] + routed + g * red[(p.k * ROWS + i) * WG + t];
        } else {
          h[r] = h_old[i] + routed;
        }
      }
    }
  }
}
