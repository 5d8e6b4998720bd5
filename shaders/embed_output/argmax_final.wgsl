// Argmax over partials: one workgroup reduces the m partials (f32 bits, index pairs; row_argmax_parts.wgsl) to
// out[0], the index of the largest value, ties to the lower index, and out[1], that value's f32 bits (greedy
// decoding reads these 8 bytes back instead of the logits row). WG lanes (workgroups.argmax_workgroup: 1024 where the
// adapter allows, else 256).
struct Params { m: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const NONE: u32 = 0xffffffffu;
const WG: u32 = {{WG}}u;
var<workgroup> val: array<f32, WG>;
var<workgroup> idx: array<u32, WG>;
#include "argmax_reduce.wgsl"
#include "argmax_step_{{STEP}}.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  var bv = -3.4e38;
  var bi = NONE;
  // The lane's partials t, t + WG, ... in that order, eight loads issued together per step: one at a time, each
  // waited for its memory round trip (the output head leaves ~15k partials: ~15 a lane in 1024 lanes, two steps;
  // ~61 in 256, eight).
  for (var j0 = t; j0 < p.m; j0 += 8u * WG) {
    var c: array<vec2<u32>, 8>;
    for (var u = 0u; u < 8u; u++) {
      let j = j0 + u * WG;
      c[u] = select(vec2<u32>(0u, NONE), part[min(j, p.m - 1u)], j < p.m);
    }
    for (var u = 0u; u < 8u; u++) {
      let v = bitcast<f32>(c[u].x);
      // partials come in increasing index ranges, so '>' keeps the lower index here too
      if (c[u].y != NONE && (bi == NONE || v > bv)) {
        bv = v;
        bi = c[u].y;
      }
    }
  }
  reduce_argmax(t, bv, bi);
  if (t == 0u) {
    out[0] = idx[0];
    out[1] = bitcast<u32>(val[0]);
    after_argmax(idx[0]);
  }
}
