// moe_gate_up.wgsl over the streamed expert pool: for each of the k picked experts (wg.y = k index) and row r
//   act[k * rows + r] = silu(G_k[r] · x) · U_k[r] · x
// with G_k / U_k the gate and up parts of the store record in slot route_slots[k]. As in moe_pool_matvec.wgsl the
// pool is several buffers of `spb` slots; this dispatch reads buffer `buf` and only experts whose slot lies in it
// do work (one dispatch per pool buffer covers all k). Both parts of a record share a buffer and a format (WFMT);
// their codes / scales start at slot_local * stride + the part's offsets.
struct Params {
  rows: u32, nb: u32, buf: u32, spb: u32,
  stride: u32, gate_codes: u32, gate_scales: u32, up_codes: u32,
  up_scales: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> act: array<f32>;
#include "x_stage_{{XFMT}}.wgsl"
#include "moe_pool_part_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> route_slots: array<u32>;

const LANES: u32 = {{LANES}}u;
const ABSENT: u32 = 0xFFFFFFFFu;
#include "group_sum4.wgsl"
#include "silu_times.wgsl"

const WG: u32 = 64u;   // lanes per workgroup (and group_sum4.wgsl's tree)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let k = wg.y;
  let row = wg.x * (WG / LANES) + lid.x / LANES;
  let lane = lid.x % LANES;
  let slot = route_slots[k];
  // An absent expert (never expected) yields silu(0) · 0 = 0, written by the first buffer's dispatch.
  let absent = slot == ABSENT;
  let mine = !absent && slot / p.spb == p.buf;
  var acc = vec2<f32>(0.0);
  stage_x(lid.x, WG, 0u, select(0u, p.nb, mine));   // every lane (a barrier); nothing for other buffers
  if (mine && row < p.rows) {
    let base = (slot % p.spb) * p.stride;
    let gc = base + p.gate_codes;
    let gs = base + p.gate_scales;
    let uc = base + p.up_codes;
    let us = base + p.up_scales;
    for (var b = lane; b < p.nb; b += LANES) {
      let blk = row * p.nb + b;
      acc += vec2<f32>(part_dot_q(gc, gs, blk, b), part_dot_q(uc, us, blk, b));
    }
  }
  let total = group_sum(vec4<f32>(acc, 0.0, 0.0), lid.x).xy;
  if (lane == 0u && row < p.rows && (mine || (absent && p.buf == 0u))) {
    act[k * p.rows + row] = silu_times(total.x, total.y);
  }
}
