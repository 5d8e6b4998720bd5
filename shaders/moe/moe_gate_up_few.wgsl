// The prefill's routed gate and up products and their SwiGLU in one pass, for experts with few picks (the lane layout
// of moe_gemm_few.wgsl), written as the routed down product's input already quantised to Q8_0:
//   act[pick] = silu(G_e · x[pick / x_div]) · (U_e · x[pick / x_div]),   rows of G_e and U_e: 64 per workgroup
// x is the chunk's normed rows as the norm quantised them (rmsnorm_q8.wgsl; read by moe_x_q8.wgsl). Each staged
// block serves both products, each weight block is loaded once into registers for every pick of the pass (up to
// TT), and the act rows' 32-blocks (two per workgroup) are quantised here once (q8_block.wgsl)
// instead of by each of the down product's workgroups. The sums are moe_gemm_few.wgsl's, in its order, and the
// SwiGLU silu_mul.wgsl's expression: the codes and scales are those the separate gate, up, silu_mul and the down
// product's staging make.
// G: bindings 3/4 (codes_off / scales_off), U: bindings 8/9 (codes_off2 / scales_off2), the same slots. Output y:
// block ob of pick q has its codes at u32 8·(q·nbo + ob) (nbo = rows / 32) and its scale at u32 y_scales + q·nbo +
// ob (moe_x_q8.wgsl reads it). rows % 32 == 0. Workgroups: (ceil(rows / 64), n_exp); 9 storage bindings.
#include "moe_picks.wgsl"
#include "gemm_w_q8.wgsl"
#include "q8_block.wgsl"
#include "moe_x_q8.wgsl"
#include "silu_times.wgsl"
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@group(0) @binding(8) var<storage, read> u_codes: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read> u_scales: array<u32>;

#include "moe_few_stage.wgsl"
var<workgroup> part_g: array<f32, 256>;
var<workgroup> part_u: array<f32, 256>;
var<workgroup> act: array<f32, TT * FR>;  // [pick][row]: the pass's SwiGLU outputs

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
  let lid = lid3.x;
  let e = wg.y;
  let total = expert_picks(e, lid);
  if (total == 0u) {
    return;
  }
  let at = expert_weights(e);
  let lslot = slot_map[p.map_base + e] % p.spb;
  let atu = vec2<u32>(lslot * p.code_stride + p.codes_off2, lslot * p.scale_stride + p.scales_off2);
  let row = wg.x * FR + lid / FL;
  let wrow = min(row, p.rows - 1u);  // rows past the end load a real row, never written
  let j = lid % FL;
  let nbo = p.rows / 32u;
  for (var t0 = 0u; t0 < total; t0 += TT) {
    let n = min(TT, total - t0);
    var acc_g = array<f32, TT>();
    var acc_u = array<f32, TT>();
    for (var b0 = 0u; b0 < p.nb; b0 += KC) {
      stage_picks(lid, e, t0, n, b0);
      workgroupBarrier();
      for (var bb = j; bb < KC; bb += FL) {
        let b = b0 + bb;
        if (b < p.nb) {
          let blk = wrow * p.nb + b;
          let cg = w_block_codes(at.x + blk * BLK_V);
          let dg = w_block_scale(at.y + blk);
          let cu0 = u_codes[atu.x + blk * BLK_V];
          let cu1 = u_codes[atu.x + blk * BLK_V + 1u];
          let su = atu.y + blk;
          let du = unpack2x16float(u_scales[su >> 1u])[su & 1u];
          for (var t = 0u; t < TT; t++) {  // a constant trip count keeps the sums in registers
            if (t < n) {
              let s = t * KC + bb;
              let q0 = xq[2u * s];
              let q1 = xq[2u * s + 1u];
              acc_g[t] += (dg * xd[s]) * f32(dot_codes32(cg[0], cg[1], q0, q1));
              acc_u[t] += (du * xd[s]) * f32(dot_codes32(cu0, cu1, q0, q1));
            }
          }
        }
      }
      workgroupBarrier();
    }
    // the row's 4 lanes, pick by pick, then silu(gate) · up into the pass's act rows
    for (var t = 0u; t < TT; t++) {
      if (t < n) {  // n is uniform: the barriers stay in uniform control flow
        part_g[lid] = acc_g[t];
        part_u[lid] = acc_u[t];
        workgroupBarrier();
        if (j == 0u) {
          let g = ((part_g[lid] + part_g[lid + 1u]) + part_g[lid + 2u]) + part_g[lid + 3u];
          let u = ((part_u[lid] + part_u[lid + 1u]) + part_u[lid + 2u]) + part_u[lid + 3u];
          act[t * FR + lid / FL] = silu_times(g, u);
        }
        workgroupBarrier();
      }
    }
    // each of the pass's (pick, output block) pairs quantised by one lane
    if (lid < 2u * n) {
      let t = lid / 2u;
      let ob = wg.x * 2u + lid % 2u;
      if (ob < nbo) {
        var v: array<vec4<f32>, 8>;
        let a0 = t * FR + (lid % 2u) * 32u;
        for (var i = 0u; i < 8u; i++) {
          v[i] = vec4<f32>(act[a0 + 4u * i], act[a0 + 4u * i + 1u], act[a0 + 4u * i + 2u], act[a0 + 4u * i + 3u]);
        }
        var q = q8_block(v);
        let o = grouped[pick_at(e, t0 + t)] * nbo + ob;
        for (var i = 0u; i < 8u; i++) {
          y[8u * o + i] = q.codes[i];
        }
        y[p.y_scales + o] = bitcast<u32>(q.d);  // scalar stores: neighbouring scales come from other workgroups
      }
    }
    workgroupBarrier();  // the next pass writes act again
  }
}
