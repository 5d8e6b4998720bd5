// The end of a qwen35moe FFN block in one pass: the shared expert's down product, then the block's sums into h:
//   h[r] = h[r] + Σ_k route_w[k] · down[k * rows + r] + sigmoid(Σ_j gate_w[j] · xn[j]) · (W_down[r] · act)
// (the order of moe_combine.wgsl then shared_expert_gate.wgsl, as llama.cpp adds them). The product is the matvec.wgsl
// layout (LANES lanes per group of ROWS rows, act staged per workgroup: Q8_0 weights quantise it as llama.cpp does);
// every workgroup computes the gate itself (n_gate MACs, four neighbouring values per lane and step), so the down
// product and the combine are one dispatch. Everything the last step adds (h, the routed experts' outputs and weights) is
// loaded at the start, its latency hidden behind the gate, the staging and the product.
struct Params { rows: u32, nb: u32, k: u32, n_gate: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;       // act: the shared expert's SwiGLU output
@group(0) @binding(2) var<storage, read_write> h: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "x_stage_{{XFMT}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> route_w: array<f32>;
@group(0) @binding(6) var<storage, read> down: array<f32>;         // the routed experts' outputs, k × rows
@group(0) @binding(7) var<storage, read> xn: array<f32>;           // the block's normed input
@group(0) @binding(8) var<storage, read> gate_w: array<f32>;       // ffn_gate_inp_shexp (F32)

const LANES: u32 = {{LANES}}u;
const ROWS: u32 = {{ROWS}}u;   // 1, 2 or 4 (one vec4 accumulator)
#include "row_reduce4.wgsl"

const SUM_LANES: u32 = 64u;
#include "workgroup_sum.wgsl"
var<workgroup> down_terms: array<vec4<f32>, 64>;   // lane j of a group: routed expert j's outputs for its rows
var<workgroup> route_terms: array<f32, 64>;        // lane j of a group: routed expert j's weight

fn shared_gate(t: u32) -> f32 {
  var acc = 0.0;
  for (var j = 4u * t; j < p.n_gate; j += 256u) {
    for (var c = 0u; c < 4u; c++) {   // a constant count: unrolled, the loads issued together
      if (j + c < p.n_gate) {
        acc += gate_w[j + c] * xn[j + c];
      }
    }
  }
  return 1.0 / (1.0 + exp(-workgroup_sum(acc, t)));
}

const WG: u32 = 64u;   // lanes per workgroup (and group_sum4.wgsl's tree)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let row0 = ((wg.y * ng.x + wg.x) * (WG / LANES) + lid.x / LANES) * ROWS;
  let lane = lid.x % LANES;
  var h_old = vec4<f32>(0.0);
  if (lane < p.k) {   // lanes k < p.k fetch routed expert k's terms (the barriers below publish them)
    var d = vec4<f32>(0.0);
    for (var i = 0u; i < ROWS; i++) {
      d[i] = down[lane * p.rows + min(row0 + i, p.rows - 1u)];
    }
    down_terms[lid.x] = d;
    route_terms[lid.x] = route_w[lane];
  }
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      h_old[i] = h[min(row0 + i, p.rows - 1u)];
    }
  }
  let gate = shared_gate(lid.x);
  stage_x(lid.x, WG, 0u, p.nb);
  let acc = rows_partial(row0, lane, 0u, p.rows, p.nb);
  let total = group_sum(acc, lid.x);
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      let r = row0 + i;
      if (r < p.rows) {
        var routed = 0.0;
        for (var k = 0u; k < p.k; k++) {
          if (k < LANES) {
            routed += route_terms[lid.x + k] * down_terms[lid.x + k][i];
          } else {
            routed += route_w[k] * down[k * p.rows + r];
          }
        }
        h[r] = h_old[i] + routed + gate * total[i];
      }
    }
  }
}
