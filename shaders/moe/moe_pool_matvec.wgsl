// Routed-expert products over the streamed expert pool: for each of the k picked experts (wg.y = k index)
//   y[k * rows + r] = W_k[r] · x_k,   W_k = one part (gate, up or down) of the record in slot route_slots[k]
// The pool is several buffers of `spb` slots each (no binding may exceed the device's limit); this dispatch reads
// buffer `buf` and only the experts whose slot lies in it do work, so one dispatch per pool buffer covers all k.
// A slot holds a store record as is: the part's codes start at byte slot_local * stride + codes_off, its f16
// scales at slot_local * stride + scales_off (both 256-byte aligned), rows of nb 32-column blocks each.
// x_k = x[x_base + k * x_stride ..] (x_stride = 0: every expert reads the same input, as gate/up do).
struct Params {
  rows: u32, nb: u32, x_base: u32, x_stride: u32,
  buf: u32, spb: u32, stride: u32, codes_off: u32,
  scales_off: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "x_stage_{{XFMT}}.wgsl"
#include "moe_pool_dot_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> route_slots: array<u32>;

const LANES: u32 = {{LANES}}u;
const ABSENT: u32 = 0xFFFFFFFFu;
#include "group_sum4.wgsl"

const WG: u32 = 64u;   // lanes per workgroup (and group_sum4.wgsl's tree)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let k = wg.y;
  let row = wg.x * (WG / LANES) + lid.x / LANES;
  let lane = lid.x % LANES;
  let slot = route_slots[k];
  // An absent expert (never expected) contributes zeros, written by the first buffer's dispatch.
  let absent = slot == ABSENT;
  let mine = !absent && slot / p.spb == p.buf;
  var acc = 0.0;
  var stage_at = 0u;
  if (mine) {
    stage_at = (p.x_base + k * p.x_stride) / 4u;
  }
  stage_x(lid.x, WG, stage_at, select(0u, p.nb, mine));   // every lane (a barrier); nothing for other buffers
  if (mine && row < p.rows) {
    let base = (slot % p.spb) * p.stride;
    for (var b = lane; b < p.nb; b += LANES) {
      acc += expert_dot_q(base, row * p.nb + b, b);
    }
  }
  let total = group_sum(vec4<f32>(acc, 0.0, 0.0, 0.0), lid.x).x;
  if (lane == 0u && row < p.rows && (mine || (absent && p.buf == 0u))) {
    y[k * p.rows + row] = total;
  }
}
