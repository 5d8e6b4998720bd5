// The lane layout of the few-picks expert products (moe_gemm_few.wgsl, moe_gate_up_few.wgsl): a workgroup of
// 256 lanes holds FR = 64 weight rows of expert e, FL = 4 lanes per row (lane j of a row over blocks b ≡ j mod 4), for
// up to TT = 8 picks per pass; the picks' activation blocks are staged KC = 16 at a time (on the H200 at 512 tokens,
// 16 per expert on average, the down product took 0.90x the time of 16 picks × 8 blocks, gate/up the same; 32 × 4 and
// 16 × 16 were slower: lab/gpu_probes/gemm_variants.mjs --few). The includer provides x_block(r, b)
// (moe_x_{f32,q8}.wgsl) and moe_picks.wgsl.
const TT: u32 = 8u;   // picks per pass
const FR: u32 = 64u;  // weight rows per workgroup
const FL: u32 = 4u;   // lanes per row
const KC: u32 = 16u;  // blocks staged per step
var<workgroup> xq: array<vec4<u32>, TT * KC * 2u>;  // [pick][block][half] (32 codes per block)
var<workgroup> xd: array<f32, TT * KC>;             // [pick][block]: d_x

// Stages blocks b0 .. b0 + KC of picks t0 .. t0 + n of expert e: lane l < TT·KC takes block b0 + l % KC of pick
// t0 + l / KC (zero codes past the picks or the row). Every lane calls it; the caller's barrier follows.
fn stage_picks(lid: u32, e: u32, t0: u32, n: u32, b0: u32) {
  if (lid < TT * KC) {
    let t = lid / KC;
    let b = b0 + lid % KC;
    var q: Q8Block;
    if (t < n && b < p.nb) {
      q = x_block(grouped[pick_at(e, t0 + t)] / p.x_div, b);
    }
    xq[2u * lid] = vec4<u32>(q.codes[0], q.codes[1], q.codes[2], q.codes[3]);
    xq[2u * lid + 1u] = vec4<u32>(q.codes[4], q.codes[5], q.codes[6], q.codes[7]);
    xd[lid] = q.d;
  }
}
