// The lane layout shared by the one-token and chunk DeltaNet recurrences: a workgroup of 256 covers COLS value
// columns j of a head's state S; the SLICES lanes of a column split its key rows (i ≡ slice mod SLICES) and keep
// them in registers (MAX_ROWS each). Also the q/k staging of gdn_qk_norm.wgsl and the column sum. The includer
// declares p (dk, eps) and qkv_at(e).
const WG: u32 = 256u;
const COLS: u32 = 32u;                 // value columns per workgroup
const SLICES: u32 = WG / COLS;         // lanes per column, each over key rows i ≡ slice (mod SLICES)
const MAX_DK: u32 = 256u;
const MAX_ROWS: u32 = MAX_DK / SLICES; // key rows one lane keeps
var<workgroup> q_sh: array<f32, MAX_DK>;
var<workgroup> k_sh: array<f32, MAX_DK>;
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
