// The prefill's routed-expert GEMM for experts with few picks (moe_gemm.wgsl's product and interface, Q8_0
// weights × x quantised to Q8_0 as llama.cpp does, int8 dot products; another split of the work). With a handful of
// picks per expert, expert_gemm's tile (128 rows × 16 tokens, each staged weight word read from workgroup memory for
// each of its tokens) is bound by those reads; here a lane loads each of its weight blocks once, from storage into
// registers, and multiplies it into every pick of the pass. Workgroup (64 weight rows, expert e), 256 lanes: 4 lanes
// per row, lane j of a row over blocks b ≡ j (mod 4). The picks' activations are staged TT picks × KC blocks
// at a time, quantised while staging (XIN = f32: moe_x_f32.wgsl) or read already quantised (XIN = q8:
// moe_x_q8.wgsl, the same codes); per pick a lane sums (d_w · d_x) · Σ q_w · q_x over its blocks in order, then
// the row's 4 lanes are added (lane 0 + 1 + 2 + 3). Picks beyond TT take further passes.
// Workgroups: (ceil(rows / 64), n_exp). Correct for any subgroup size (no subgroup operations).
#include "moe_picks.wgsl"
#include "gemm_w_q8.wgsl"
#include "q8_block.wgsl"
#include "moe_x_{{XIN}}.wgsl"
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

#include "moe_few_stage.wgsl"
var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
  let lid = lid3.x;
  let e = wg.y;
  let total = expert_picks(e, lid);
  if (total == 0u) {
    return;
  }
  let at = expert_weights(e);
  let row = wg.x * FR + lid / FL;
  let live = row < p.rows;
  let wrow = min(row, p.rows - 1u);  // rows past the end load a real row, never written
  let j = lid % FL;
  for (var t0 = 0u; t0 < total; t0 += TT) {
    let n = min(TT, total - t0);
    var acc = array<f32, TT>();
    for (var b0 = 0u; b0 < p.nb; b0 += KC) {
      stage_picks(lid, e, t0, n, b0);
      workgroupBarrier();
      for (var bb = j; bb < KC; bb += FL) {
        let b = b0 + bb;
        if (b < p.nb) {
          let blk = wrow * p.nb + b;
          let c = w_block_codes(at.x + blk * BLK_V);
          let dw = w_block_scale(at.y + blk);
          for (var t = 0u; t < TT; t++) {  // a constant trip count keeps acc in registers
            if (t < n) {
              let s = t * KC + bb;
              acc[t] += (dw * xd[s]) * f32(dot_codes32(c[0], c[1], xq[2u * s], xq[2u * s + 1u]));
            }
          }
        }
      }
      workgroupBarrier();
    }
    // the row's 4 lanes, pick by pick
    for (var t = 0u; t < TT; t++) {
      if (t < n) {  // n is uniform: the barriers stay in uniform control flow
        part[lid] = acc[t];
        workgroupBarrier();
        if (j == 0u && live) {
          let pick = grouped[pick_at(e, t0 + t)];
          y[pick * p.rows + row] = ((part[lid] + part[lid + 1u]) + part[lid + 2u]) + part[lid + 3u];
        }
        workgroupBarrier();
      }
    }
  }
}
