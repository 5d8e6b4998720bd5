// The gated delta rule over a prefill chunk: gdn_conv_recurrent.wgsl's update for rows t = 0 .. chunk.n - 1 in order,
// in one dispatch. The recurrence is sequential in t, so the state S stays in registers for the whole chunk: it is
// read once before row 0 and written once after the last row (per row only q, k, v and the gates come from
// memory). Same layout as gdn_conv_recurrent.wgsl: a workgroup of 256 covers 32 value columns j of a head; the 8 lanes
// of a column split its key rows (i ≡ slice mod 8), so each lane keeps dk / 8 of S. Row t reads q|k|v at
// qkv[t·qkv_stride + {q,k,v}_base], beta_raw | alpha_raw at gates[t·gates_stride], and writes o at
// out[t·out_stride + h·dv + j]. A chunk starting at position 0 starts a sequence (the stored S reads as zeros).
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

fn qkv_at(e: u32) -> f32 {
  return qkv[e];
}

#include "gdn_columns.wgsl"

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

  for (var row = 0u; row < chunk.n; row++) {
    let xb = row * p.qkv_stride;
    let scales = load_qk(t, xb + p.q_base + kh * p.dk, xb + p.k_base + kh * p.dk);
    let q_scale = scales.x;
    let k_scale = scales.y;
    let gb = row * p.gates_stride;
    let beta = 1.0 / (1.0 + exp(-gates[gb + h]));
    let decay = exp(softplus(gates[gb + p.n_v_heads + h] + dt_bias[h]) * ssm_a[h]);

    // decayed S and this lane's part of Sᵀk (the same order of operations as gdn_conv_recurrent.wgsl)
    var s_k = 0.0;
    for (var r = 0u; r < MAX_ROWS; r++) {
      let i = slice + r * SLICES;
      if (i < p.dk) {
        rows[r] *= decay;
        s_k += rows[r] * k_sh[i];
      }
    }
    s_k = column_sum(s_k, t) * k_scale;
    var d = 0.0;
    if (live) {
      d = (qkv[xb + p.v_base + h * p.dv + j] - s_k) * beta;
    }
    var o = 0.0;
    for (var r = 0u; r < MAX_ROWS; r++) {
      let i = slice + r * SLICES;
      if (i < p.dk) {
        rows[r] += k_sh[i] * k_scale * d;
        o += rows[r] * q_sh[i];
      }
    }
    o = column_sum(o, t);
    if (live && slice == 0u) {
      out[row * p.out_stride + h * p.dv + j] = o * q_scale;
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
