// The end of a MoE FFN block in one pass: the k routed experts' down products, with SHARED also the shared expert's
// (qwen35moe), and the block's sums into h:
//   h[r] = h[r] + Σ_k route_w[k] · (D_slot(k)[r] · a_k)  [+ g · (D_shared[r] · a_shared)]
// slot = slot_map[map_base + route_ids[k]]; the ids and weights (f32 bits) are read from `route` (route_layout:
// moe_route_gate_up.wgsl stored them there). act (binding 1) holds a_0 .. a_{k-1} (n_ff values each), then
// a_shared and g = sigmoid(gate_inp_shexp · xn) (moe_gate_up.wgsl with ROUTE = sgate wrote both).
// Each (row, expert) dot is moe_matvec.wgsl's (LANES lanes, each its blocks in ascending order, summed by
// row_reduce4's tree) and the sums are added in moe_combine.wgsl's / shexp_down_combine.wgsl's order, so the
// result has the bits of those dispatches: two or three dispatches of a layer in one. Every workgroup stages all
// the experts' activations (quantised per 32-block for Q8_0 weights) for its 64 / LANES · ROWS rows.
struct Params { rows: u32, nb: u32, k: u32, map_base: u32, ids_base: u32, w_base: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;       // act: a_0 .. a_{k-1} | a_shared | g
@group(0) @binding(2) var<storage, read_write> h: array<f32>;
#include "weights_{{WFMT}}.wgsl"
#include "x_stage_{{XFMT}}.wgsl"
#include "block_dot_{{WFMT}}.wgsl"
#include "up_weights_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> route: array<u32>;
@group(0) @binding(6) var<storage, read> slot_map: array<u32>;

const LANES: u32 = {{LANES}}u;
const ROWS: u32 = {{ROWS}}u;          // rows per lane group
const SHARED: bool = {{SHARED}};
const N_E: u32 = {{N_E}}u;            // the experts summed: p.k, + 1 with SHARED
var<workgroup> red: array<f32, 64u * N_E * ROWS>;   // [expert][row][lane] partials, summed in place

// Lane `lane`'s partial sums for rows row0 .. of expert e (block rows of weight row `base` on): rows_partial's
// blocks and order (four loads in flight per step); the shared expert's weights are the second matrix (binding 7/8).
fn expert_partial(e: u32, is_shared: bool, row0: u32, lane: u32, base: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  let xb = e * p.nb;   // the expert's first staged block
  var b = lane;
  for (; b + 3u * LANES < p.nb; b += 4u * LANES) {
    for (var i = 0u; i < ROWS; i++) {
      let blk = (base + min(row0 + i, p.rows - 1u)) * p.nb + b;
      var d: vec4<f32>;
      if (is_shared) {
        d = vec4<f32>(up_block_dot_q(blk, xb + b), up_block_dot_q(blk + LANES, xb + b + LANES),
                      up_block_dot_q(blk + 2u * LANES, xb + b + 2u * LANES),
                      up_block_dot_q(blk + 3u * LANES, xb + b + 3u * LANES));
      } else {
        d = vec4<f32>(block_dot_q(blk, xb + b), block_dot_q(blk + LANES, xb + b + LANES),
                      block_dot_q(blk + 2u * LANES, xb + b + 2u * LANES),
                      block_dot_q(blk + 3u * LANES, xb + b + 3u * LANES));
      }
      acc[i] += d.x;
      acc[i] += d.y;
      acc[i] += d.z;
      acc[i] += d.w;
    }
  }
  for (; b < p.nb; b += LANES) {
    for (var i = 0u; i < ROWS; i++) {
      let blk = (base + min(row0 + i, p.rows - 1u)) * p.nb + b;
      if (is_shared) {
        acc[i] += up_block_dot_q(blk, xb + b);
      } else {
        acc[i] += block_dot_q(blk, xb + b);
      }
    }
  }
  return acc;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let row0 = ((wg.y * ng.x + wg.x) * (64u / LANES) + t / LANES) * ROWS;
  let lane = t % LANES;
  var h_old = vec4<f32>(0.0);   // loaded first: its latency overlaps the staging and the products
  if (lane == 0u) {
    for (var i = 0u; i < ROWS; i++) {
      h_old[i] = h[min(row0 + i, p.rows - 1u)];
    }
  }
  stage_x(t, 64u, 0u, N_E * p.nb);
  if (row0 < p.rows) {
    for (var e = 0u; e < N_E; e++) {
      let is_shared = SHARED && e == p.k;
      var base = 0u;
      if (!is_shared) {
        base = slot_map[p.map_base + route[p.ids_base + e]] * p.rows;
      }
      let acc = expert_partial(e, is_shared, row0, lane, base);
      for (var i = 0u; i < ROWS; i++) {
        red[(e * ROWS + i) * 64u + t] = acc[i];
      }
    }
  }
  workgroupBarrier();
  // row_reduce4's group_sum tree, for every (expert, row) at once
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s && row0 < p.rows) {
      for (var e = 0u; e < N_E; e++) {
        for (var i = 0u; i < ROWS; i++) {
          let at = (e * ROWS + i) * 64u + t;
          red[at] += red[at + s];
        }
      }
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    var g = 0.0;
    if (SHARED) {
      let gi = (p.k + 1u) * p.nb * 32u;
      g = x[gi / 4u][gi % 4u];
    }
    for (var i = 0u; i < ROWS; i++) {
      let r = row0 + i;
      if (r < p.rows) {
        var routed = 0.0;
        for (var e = 0u; e < p.k; e++) {
          routed += bitcast<f32>(route[p.w_base + e]) * red[(e * ROWS + i) * 64u + t];
        }
        if (SHARED) {
          h[r] = h_old[i] + routed + g * red[(p.k * ROWS + i) * 64u + t];
        } else {
          h[r] = h_old[i] + routed;
        }
      }
    }
  }
}
