// The gated delta rule over a prefill chunk: gdn_conv_recurrent.wgsl's update for rows t = 0 .. chunk.n - 1 in order,
// in one dispatch. The recurrence is sequential in t, so the state S stays in registers for the whole chunk: it is
// read once before row 0 and written once after the last row. Same layout as gdn_conv_recurrent.wgsl: a workgroup
// of 256 covers 32 value columns j of a head; the 8 lanes of a column split its key rows (i ≡ slice mod 8), so each
// lane keeps dk / 8 of S. Row t reads q|k|v at qkv[t·qkv_stride + {q,k,v}_base], beta_raw | alpha_raw at
// gates[t·gates_stride], the q and k scales and q·k at scales[t · n_k_heads + kh] (gdn_qk_scales.wgsl, for all rows
// ahead), and writes o at out[t·out_stride + h·dv + j]. The rows go in blocks of RB: a block's inputs (q, k, v, the
// gates' beta and decay, the scales) are staged in workgroup memory at once, having been loaded into registers while
// the block before computed (a row's global loads waited on every row before), and a row takes one column sum of two
// values (S·k and S·q of the decayed state): with
//   S' = decay·S + (k_scale·k) dᵀ,  d = (v - k_scale·(decay·S)ᵀk) · beta,
//   o = q_scale · S'ᵀq = q_scale · ((decay·S)ᵀq + k_scale · d · (q·k)),
// two barriers per row and one per block (the one-token kernel's order of operations differs: the same values to
// rounding).
// A chunk starting at position 0 starts a sequence (the stored S reads as zeros).
// Workgroups: (ceil(dv / 32), n_v_heads).
#include "chunk.wgsl"
struct Params {
  n_k_heads: u32, n_v_heads: u32, dk: u32, dv: u32,
  q_base: u32, k_base: u32, v_base: u32, eps: f32,
  qkv_stride: u32, gates_stride: u32, out_stride: u32, pad: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> gates: array<f32>;
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(5) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<storage, read> scales: array<vec4<f32>>;

#include "gdn_lanes.wgsl"
var<workgroup> part: array<vec2<f32>, WG>;

#include "softplus.wgsl"

const RB: u32 = 4u;                     // rows per staged block
const QK_PER_LANE: u32 = RB * MAX_DK / WG;  // q (and k) values of a block one lane stages
var<workgroup> qs: array<f32, RB * MAX_DK>;  // [row][i]
var<workgroup> ks: array<f32, RB * MAX_DK>;
var<workgroup> vs: array<f32, RB * COLS>;    // [row][column]
var<workgroup> bd: array<vec2<f32>, RB>;     // [row]: beta, decay
var<workgroup> scs: array<vec4<f32>, RB>;    // [row]: q_scale, k_scale, q·k

// (Σ v.x, Σ v.y) over the SLICES lanes of this lane's column (every lane gets it). Its closing barrier keeps the next
// row's part writes (and the next block's staging) after every lane's reads.
fn column_sum2(v: vec2<f32>, t: u32) -> vec2<f32> {
  part[t] = v;
  workgroupBarrier();
  let col = t % COLS;
  var s = vec2<f32>(0.0);
  for (var k = 0u; k < SLICES; k++) {
    s += part[k * COLS + col];
  }
  workgroupBarrier();
  return s;
}

// One block's inputs, as one lane loads them (rows from b0, at most RB, < chunk.n).
struct Block { q: array<f32, QK_PER_LANE>, k: array<f32, QK_PER_LANE>, v: f32, g: vec2<f32>, sc: vec4<f32> }

fn load_block(b0: u32, t: u32, h: u32, kh: u32, j: u32) -> Block {
  var bl: Block;
  let rows = min(RB, chunk.n - b0);
  for (var e = 0u; e < QK_PER_LANE; e++) {
    let x = t + e * WG;  // row x / dk, key index x % dk
    if (x < rows * p.dk) {
      let xb = (b0 + x / p.dk) * p.qkv_stride + kh * p.dk + x % p.dk;
      bl.q[e] = qkv[xb + p.q_base];
      bl.k[e] = qkv[xb + p.k_base];
    }
  }
  let r = t / COLS;  // the lanes of row r (< RB) load its v of their column
  if (r < rows && j < p.dv) {
    bl.v = qkv[(b0 + r) * p.qkv_stride + p.v_base + h * p.dv + j];
  }
  if (t < rows) {  // lane t: row t's gates and scales
    let gb = (b0 + t) * p.gates_stride;
    bl.g = vec2<f32>(gates[gb + h], gates[gb + p.n_v_heads + h]);
    bl.sc = scales[(b0 + t) * p.n_k_heads + kh];
  }
  return bl;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.y;
  let kh = h % p.n_k_heads;
  let j = wg.x * COLS + t % COLS;
  let slice = t / COLS;
  let live = j < p.dv;                 // lanes past dv still take part in the barriers
  let sb = h * p.dk * p.dv + j;

  var rows: array<f32, MAX_ROWS>;
  for (var r = 0u; r < MAX_ROWS; r++) {
    let i = slice + r * SLICES;
    var s = 0.0;
    if (live && i < p.dk && chunk.pos0 != 0u) {
      s = state[sb + i * p.dv];
    }
    rows[r] = s;
  }
  let bias = dt_bias[h];
  let a_log = ssm_a[h];

  var next = load_block(0u, t, h, kh, j);
  for (var b0 = 0u; b0 < chunk.n; b0 += RB) {
    // stage the block loaded ahead (every lane's reads of the last block ended before column_sum2's last barrier)
    let bl = next;
    for (var e = 0u; e < QK_PER_LANE; e++) {
      let x = t + e * WG;
      if (x < RB * p.dk) {
        qs[(x / p.dk) * MAX_DK + x % p.dk] = bl.q[e];
        ks[(x / p.dk) * MAX_DK + x % p.dk] = bl.k[e];
      }
    }
    if (t < RB * COLS) {
      vs[t] = bl.v;
    }
    if (t < RB) {
      bd[t] = vec2<f32>(1.0 / (1.0 + exp(-bl.g.x)), exp(softplus(bl.g.y + bias) * a_log));
      scs[t] = bl.sc;
    }
    workgroupBarrier();
    if (b0 + RB < chunk.n) {
      next = load_block(b0 + RB, t, h, kh, j);
    }

    let n_rows = min(RB, chunk.n - b0);
    for (var rr = 0u; rr < n_rows; rr++) {
      let row = b0 + rr;
      let beta = bd[rr].x;
      let decay = bd[rr].y;
      let sc = scs[rr];
      let v = vs[rr * COLS + t % COLS];
      var qr = array<f32, MAX_ROWS>();  // zeroed explicitly: a loop-body var may keep the last iteration's values
      var kr = array<f32, MAX_ROWS>();
      // the decayed S, and this lane's parts of Sᵀq and Sᵀk
      var sq = 0.0;
      var sk = 0.0;
      for (var r = 0u; r < MAX_ROWS; r++) {
        let i = slice + r * SLICES;
        if (i < p.dk) {
          qr[r] = qs[rr * MAX_DK + i];
          kr[r] = ks[rr * MAX_DK + i];
          rows[r] *= decay;
          sq += rows[r] * qr[r];
          sk += rows[r] * kr[r];
        }
      }
      let sums = column_sum2(vec2<f32>(sq, sk), t);
      let k_scale = sc.y;
      var d = 0.0;
      if (live) {
        d = (v - sums.y * k_scale) * beta;
      }
      for (var r = 0u; r < MAX_ROWS; r++) {
        if (slice + r * SLICES < p.dk) {
          rows[r] += kr[r] * k_scale * d;
        }
      }
      if (live && slice == 0u) {
        out[row * p.out_stride + h * p.dv + j] = (sums.x + k_scale * d * sc.z) * sc.x;
      }
    }
  }

  if (live) {
    for (var r = 0u; r < MAX_ROWS; r++) {
      let i = slice + r * SLICES;
      if (i < p.dk) {
        state[sb + i * p.dv] = rows[r];
      }
    }
  }
}
