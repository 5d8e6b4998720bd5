// Argmax, pass 1 of 2: workgroup g reduces x[g·PER .. (g+1)·PER) ∩ [0, n) to (largest value, its lowest index) in
// part[2g] (f32 bits), part[2g + 1] (index); argmax_final.wgsl reduces the partials. Many workgroups share the
// scan, so a 250k-entry vocabulary is read at memory speed, not by one workgroup. Ties go to the lower index.
struct Params { n: u32, per: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<u32>;

const NONE: u32 = 0xffffffffu;
var<workgroup> val: array<f32, 256>;
var<workgroup> idx: array<u32, 256>;
#include "argmax_reduce.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let g = wg.y * ng.x + wg.x;
  let lo = g * p.per;
  let hi = min(p.n, lo + p.per);
  var bv = -3.4e38;
  var bi = NONE;
  for (var i = lo + t; i < hi; i += 256u) {
    let v = x[i];
    if (bi == NONE || v > bv) {   // this lane visits indices in increasing order: '>' keeps the lower
      bv = v;
      bi = i;
    }
  }
  reduce_argmax(t, bv, bi);
  if (t == 0u && lo < p.n) {
    part[2u * g] = bitcast<u32>(val[0]);
    part[2u * g + 1u] = idx[0];
  }
}
