// The lane layout of the few-picks expert products (expert_gemm_few.wgsl, expert_gate_up_few.wgsl): a workgroup of
// 256 lanes holds FR = 64 weight rows of expert e, FL = 4 lanes per row (lane j of a row over blocks b ≡ j mod 4), for
// up to TT = 16 picks per pass; the picks' activation blocks are staged KC = 8 at a time. The includer provides
// x_block(r, b) (expert_x_{f32,q8}.wgsl) and expert_picks.wgsl.
const TT: u32 = 16u;  // picks per pass
const FR: u32 = 64u;  // weight rows per workgroup
const FL: u32 = 4u;   // lanes per row
const KC: u32 = 8u;   // blocks staged per step
var<workgroup> xq: array<vec4<u32>, 256>;  // [pick][block][half]: TT × KC × 2 (32 codes per block)
var<workgroup> xd: array<f32, 128>;        // [pick][block]: d_x

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
