// Argmax, pass 2 of 2: one workgroup reduces the m partials of argmax.wgsl (f32 bits, index pairs) to out[0], the
// index of the largest value, ties to the lower index, and out[1], that value's f32 bits (greedy decoding reads
// these 8 bytes back instead of the logits row).
struct Params { m: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const NONE: u32 = 0xffffffffu;
var<workgroup> val: array<f32, 256>;
var<workgroup> idx: array<u32, 256>;
#include "argmax_reduce.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  var bv = -3.4e38;
  var bi = NONE;
  for (var j = t; j < p.m; j += 256u) {
    let c = part[j];
    let v = bitcast<f32>(c.x);
    // partials come in increasing index ranges, so '>' keeps the lower index here too
    if (c.y != NONE && (bi == NONE || v > bv)) {
      bv = v;
      bi = c.y;
    }
  }
  reduce_argmax(t, bv, bi);
  if (t == 0u) {
    out[0] = idx[0];
    out[1] = bitcast<u32>(val[0]);
  }
}
