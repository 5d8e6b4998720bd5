// What the one-token DeltaNet recurrence and the chunk's q/k scales pass share: the lane layout (gdn_lanes.wgsl),
// the q/k staging of gdn_qk_norm.wgsl and the column sum. The includer declares p (dk, eps) and qkv_at(e).
#include "gdn_lanes.wgsl"
var<workgroup> red_q: array<f32, WG>;
var<workgroup> red_k: array<f32, WG>;
var<workgroup> part: array<f32, WG>;

#include "gdn_qk_norm.wgsl"

// Sum of `v` over the SLICES lanes of this lane's column (every lane gets it). Its closing barrier also ends every
// lane's reads of q_sh / k_sh before a next load_qk overwrites them.
fn column_sum(v: f32, t: u32) -> f32 {
  part[t] = v;
  workgroupBarrier();
  let col = t % COLS;
  var s = 0.0;
  for (var k = 0u; k < SLICES; k++) {
    s += part[k * COLS + col];
  }
  workgroupBarrier();
  return s;
}
