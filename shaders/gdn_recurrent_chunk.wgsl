// The gated delta rule over a prefill chunk: gdn_conv_recurrent.wgsl's update for rows t = 0 .. chunk.n - 1 in order,
// in one dispatch. The recurrence is sequential in t, so the state S stays in registers for the whole chunk: it is
// read once before row 0 and written once after the last row. Same layout as gdn_conv_recurrent.wgsl: a workgroup
// of 256 covers 32 value columns j of a head; the 8 lanes of a column split its key rows (i ≡ slice mod 8), so each
// lane keeps dk / 8 of S. Row t reads q|k|v at qkv[t·qkv_stride + {q,k,v}_base], beta_raw | alpha_raw at
// gates[t·gates_stride], the q and k scales and q·k at scales[t · n_k_heads + kh] (gdn_qk_scales.wgsl, for all rows
// ahead), and writes o at out[t·out_stride + h·dv + j]. The next row's inputs are loaded while a row computes, and a
// row takes one column sum of two values (S·k and S·q of the decayed state): with
//   S' = decay·S + (k_scale·k) dᵀ,  d = (v - k_scale·(decay·S)ᵀk) · beta,
//   o = q_scale · S'ᵀq = q_scale · ((decay·S)ᵀq + k_scale · d · (q·k)),
// three barriers per row (the one-token kernel's order of operations differs: the same values to rounding).
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

// (Σ v.x, Σ v.y) over the SLICES lanes of this lane's column (every lane gets it). Its closing barrier keeps the next
// row's part writes after every lane's reads.
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.y;
  let kh = h % p.n_k_heads;
  let j = wg.x * COLS + t % COLS;
  let slice = t / COLS;
  let live = j < p.dv;                 // lanes past dv still take part in the barriers
  let sb = h * p.dk * p.dv + j;
  let qk_lane = t < p.dk;              // lane t stages q[t] and k[t] of each row

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

  // row 0's inputs; in the loop, row + 1's are loaded while row computes
  var qn = 0.0;
  var kn = 0.0;
  var vn = 0.0;
  if (qk_lane) {
    qn = qkv[p.q_base + kh * p.dk + t];
    kn = qkv[p.k_base + kh * p.dk + t];
  }
  if (live) {
    vn = qkv[p.v_base + h * p.dv + j];
  }
  var gn = vec2<f32>(gates[h], gates[p.n_v_heads + h]);
  var sn = scales[kh];

  for (var row = 0u; row < chunk.n; row++) {
    if (qk_lane) {
      q_sh[t] = qn;
      k_sh[t] = kn;
    }
    let v = vn;
    let g = gn;
    let sc = sn;
    workgroupBarrier();
    var qr = array<f32, MAX_ROWS>();  // zeroed explicitly: a loop-body var may keep the last iteration's values
    var kr = array<f32, MAX_ROWS>();
    for (var r = 0u; r < MAX_ROWS; r++) {
      let i = slice + r * SLICES;
      if (i < p.dk) {
        qr[r] = q_sh[i];
        kr[r] = k_sh[i];
      }
    }
    if (row + 1u < chunk.n) {
      let xb = (row + 1u) * p.qkv_stride;
      if (qk_lane) {
        qn = qkv[xb + p.q_base + kh * p.dk + t];
        kn = qkv[xb + p.k_base + kh * p.dk + t];
      }
      if (live) {
        vn = qkv[xb + p.v_base + h * p.dv + j];
      }
      let gb = (row + 1u) * p.gates_stride;
      gn = vec2<f32>(gates[gb + h], gates[gb + p.n_v_heads + h]);
      sn = scales[(row + 1u) * p.n_k_heads + kh];
    }
    let beta = 1.0 / (1.0 + exp(-g.x));
    let decay = exp(softplus(g.y + bias) * a_log);

    // the decayed S, and this lane's parts of Sᵀq and Sᵀk
    var sq = 0.0;
    var sk = 0.0;
    for (var r = 0u; r < MAX_ROWS; r++) {
      if (slice + r * SLICES < p.dk) {
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

  if (live) {
    for (var r = 0u; r < MAX_ROWS; r++) {
      let i = slice + r * SLICES;
      if (i < p.dk) {
        state[sb + i * p.dv] = rows[r];
      }
    }
  }
}
