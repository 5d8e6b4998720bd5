// The first half of a SwiGLU FFN in one pass: gate and up products and silu(gate) · up, for each of the k routed
// experts (wg.y = k index) and row r of `rows`:
//   act[k * rows + r] = silu(G_slot[r] · x) · U_slot[r] · x,   slot = slot_map[map_base + route_ids[k]]
// G (ffn_gate_exps, bindings 3/4) and U (ffn_up_exps, bindings 7/8) are pools of same-shaped matrices, each Q8_0
// planes or F32 (WFMT / UFMT); XFMT = q8 when either is Q8_0: x is then quantised once per workgroup as llama.cpp
// does (x_stage_q8.wgsl) for the Q8_0 products (an F32 part reads x as is). The matvec.wgsl lane layout.
// ROUTE = topk: each workgroup ranks the router's logits itself (router_pick_topk.wgsl: route = logits | ids | weights);
// one more row of workgroups after the experts' is launched, whose first stores the ids and weights for the kernels
// after it; ids: the experts come from route_ids (router_pick_ids.wgsl).
// ROUTED = false: one dense pair (the shared expert): k = 1, slot 0; bindings 5/6 then hold a stand-in, unread.
// A shared expert stacked into the pools after the routed ones (slot p.shared_slot) runs as one more routed expert:
// workgroups wg.y = p.k take it (its output after the k routed experts'); launched only when the pools hold it.
// ROWS = 2 gives each lane group two rows (each workgroup quantises x once for twice the rows) where enough
// workgroups remain.
// 4 weight planes + x, act, route (ids), slot_map: 8 storage bindings (the limit may be 10).
struct Params { rows: u32, nb: u32, map_base: u32, n_exp: u32, k: u32, ids_base: u32, w_base: u32, shared_slot: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> act: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "x_stage_{{XFMT}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"
#include "up_weights_{{UFMT}}.wgsl"
#include "router_pick_{{ROUTE}}.wgsl"
@group(0) @binding(6) var<storage, read> slot_map: array<u32>;

const LANES: u32 = {{LANES}}u;
const ROUTED: bool = {{ROUTED}};
const ROWS: u32 = {{ROWS}}u;   // 1 or 2 rows per lane group: (gate, up) of each in one vec4 accumulator
#include "row_reduce4.wgsl"
#include "silu_times.wgsl"

const WG: u32 = 64u;   // lanes per workgroup (and group_sum4.wgsl's tree)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let k = wg.y;
  if (ROUTED && ROUTE_WRITER && k == ng.y - 1u) {   // the row after the experts': its first workgroup is the writer
    if (wg.x == 0u) {
      write_route(lid.x);
    }
    return;
  }
  let row0 = (wg.x * (WG / LANES) + lid.x / LANES) * ROWS;
  let lane = lid.x % LANES;
  var slot = 0u;
  if (ROUTED) {
    if (k < p.k) {
      slot = slot_map[p.map_base + routed_expert(k, lid.x)];
    } else {
      slot = p.shared_slot;
    }
  }
  var acc = vec4<f32>(0.0);
  stage_x(lid.x, WG, 0u, p.nb);
  if (row0 < p.rows) {
    // Two of the lane's blocks per step (the same additions in the same order as one at a time), so that twice
    // the independent loads are in flight.
    var b = lane;
    for (; b + LANES < p.nb; b += 2u * LANES) {
      for (var i = 0u; i < ROWS; i++) {
        let blk = (slot * p.rows + min(row0 + i, p.rows - 1u)) * p.nb + b;   // rows past the end: never written
        let g0 = block_dot_q(blk, b);
        let u0 = up_block_dot_q(blk, b);
        let g1 = block_dot_q(blk + LANES, b + LANES);
        let u1 = up_block_dot_q(blk + LANES, b + LANES);
        acc[2u * i] += g0;
        acc[2u * i + 1u] += u0;
        acc[2u * i] += g1;
        acc[2u * i + 1u] += u1;
      }
    }
    for (; b < p.nb; b += LANES) {
      for (var i = 0u; i < ROWS; i++) {
        let blk = (slot * p.rows + min(row0 + i, p.rows - 1u)) * p.nb + b;
        acc[2u * i] += block_dot_q(blk, b);
        acc[2u * i + 1u] += up_block_dot_q(blk, b);
      }
    }
  }
  let total = group_sum(acc, lid.x);
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      if (row0 + i < p.rows) {
        act[k * p.rows + row0 + i] = silu_times(total[2u * i], total[2u * i + 1u]);
      }
    }
  }
}
