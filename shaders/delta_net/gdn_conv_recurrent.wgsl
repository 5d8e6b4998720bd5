// One token of Gated DeltaNet after its input products: the causal conv + SiLU of the q, k, v channels
// (gdn_conv_step.wgsl, llama.cpp ggml_ssm_conv + ggml_silu), then the gated delta rule (llama.cpp
// build_delta_net_autoregressive), in one dispatch. Each workgroup computes the conv outputs it reads (its key
// head's q and k, its value columns' v: a few taps each) instead of a dispatch writing them all first; the inputs
// are kept in the conv's ring (slot pos % K, which no workgroup reads at this step): its v columns by each
// workgroup, a key head's q and k by column block 0 of value head kh. Per value head h, reading key head
// kh = h % n_k_heads (llama.cpp repeats the key heads tiled, ggml_repeat_4d):
//   q, k   = l2norm(q_kh), l2norm(k_kh)       l2norm(x) = x / max(||x||, eps)    (ggml_l2_norm: eps is a floor)
//   q     *= 1 / sqrt(dk)
//   beta   = sigmoid(beta_raw[h]);  g = softplus(alpha_raw[h] + dt_bias[h]) · ssm_a[h]
//   S     *= exp(g);  d = beta · (v − Sᵀk);  S += k ⊗ d;  o = Sᵀq
// S of a head is dk × dv, stored key-major (state[h][i][j], i = key index, j = value index) so that neighbouring
// invocations (neighbouring j) read neighbouring words. A workgroup of 256 covers COLS value columns j (8); the
// SLICES lanes of a column (32) split its key rows (i ≡ slice mod SLICES) and keep them in registers.
// The kernel is a chain of dependent steps (loads, sums), so it takes every sum in one pass over the rows: with
// A = S'ᵀk and B = S'ᵀq of the raw (unnormalised) q and k (S' = S · exp(g)), and ||q||², ||k||², q·k,
//   d = beta · (v − ks·A),   o = Sᵀq after the update = qs · (B + ks · d · q·k)
// (ks, qs the l2 scales), so one column sum gives all five and the state's loads are issued with the conv's,
// before q and k are staged. Each column's lanes cover all dk rows, so every column gets the same ||q||², ||k||²
// and q·k.
// Position 0 starts a sequence: the stored S and conv inputs read as zeros (no clearing pass).
// GDN_OUT pregated (gdn_out_pregated.wgsl) also does the part of the gated RMSNorm after it that needs no per-head
// sum: out gets o · norm_w · silu(z), and lane 0 each workgroup's Σ o² (x_norm_pregated.wgsl sums them per head in
// the output product's staging); plain (gdn_out_plain.wgsl) writes o.
// Workgroups: (ceil(dv / COLS), n_v_heads). Correct for any subgroup size (no subgroup operations).
#include "step.wgsl"
struct Params {
  n_k_heads: u32, n_v_heads: u32, dk: u32, dv: u32,
  q_base: u32, k_base: u32, v_base: u32, eps: f32,  // q | k | v: conv channels
  n: u32, k: u32, x_base: u32, z_base: u32,  // conv channels, taps, where the conv's input and z start in dn
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> dn: array<f32>;  // beta_raw[n_v] | alpha_raw[n_v] .. conv input at x_base
@group(0) @binding(3) var<storage, read> w: array<f32>;   // ssm_conv1d
@group(0) @binding(4) var<storage, read_write> window: array<f32>;
@group(0) @binding(5) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(6) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(7) var<storage, read_write> state: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;  // o[h * dv + j]

#include "gdn_conv_step.wgsl"
#include "softplus.wgsl"
#include "gdn_lanes.wgsl"
#include "gdn_out_{{GDN_OUT}}.wgsl"

// each lane's part of its column's sums: (A, B, ||q||², ||k||²) and q·k
var<workgroup> part4: array<vec4<f32>, WG>;
var<workgroup> part_qk: array<f32, WG>;
var<workgroup> v_cols: array<f32, COLS>;   // each column's v input (for lane 0's Σ o², GDN_OUT pregated)

// Conv channel e's output at this token.
fn qkv_at(e: u32) -> f32 {
  return conv_silu_at(e, dn[p.x_base + e], step.pos);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.y;
  let kh = h % p.n_k_heads;
  let col = t % COLS;
  let j = wg.x * COLS + col;
  let slice = t / COLS;
  let live = j < p.dv;                 // lanes past dv still take part in the barriers
  let sb = h * p.dk * p.dv + j;
  let fresh = step.pos == 0u;
  // every load this lane needs before the barrier, issued together: its state rows, its column's v input, and
  // (lanes below dk) one channel of the key head's q and k
  // (constant trip counts, so a compiler can unroll and keep `rows` in registers)
  var rows: array<f32, MAX_ROWS>;
  for (var r = 0u; r < MAX_ROWS; r++) {
    let i = slice + r * SLICES;
    var s = 0.0;
    if (i < p.dk && live && !fresh) {
      s = state[sb + i * p.dv];
    }
    rows[r] = s;
  }
  let v_at = p.v_base + h * p.dv + j;
  var v_in = 0.0;
  var out_w = 1.0;   // what o is multiplied by before it is written
  if (live) {
    v_in = qkv_at(v_at);
    if (slice == 0u) {
      out_w = out_weight(h, j);
    }
  }
  if (OUT_SQ && slice == 0u) {
    v_cols[col] = v_in;
  }
  for (var i = t; i < p.dk; i += WG) {
    q_sh[i] = qkv_at(p.q_base + kh * p.dk + i);
    k_sh[i] = qkv_at(p.k_base + kh * p.dk + i);
  }
  let beta = 1.0 / (1.0 + exp(-dn[h]));
  let decay = exp(softplus(dn[p.n_v_heads + h] + dt_bias[h]) * ssm_a[h]);
  workgroupBarrier();

  var sums = vec4<f32>(0.0);
  var qk = 0.0;
  for (var r = 0u; r < MAX_ROWS; r++) {
    let i = slice + r * SLICES;
    if (i < p.dk) {
      let s = rows[r] * decay;
      rows[r] = s;
      let qv = q_sh[i];
      let kv = k_sh[i];
      sums += vec4<f32>(s * kv, s * qv, qv * qv, kv * kv);
      qk += qv * kv;
    }
  }
  part4[t] = sums;
  part_qk[t] = qk;
  workgroupBarrier();
  // The column's SLICES partials summed by a tree, four to one per barrier (two to one where four do not divide):
  // every lane adding all SLICES of its column's partials itself cost the workgroup SLICES times the loads, ~1.7 µs
  // a dispatch on an H100 (docs/results/2026-12-06-h100-gdn-column-tree.json).
  for (var n = SLICES; n > 1u; ) {
    let f = select(2u, 4u, n % 4u == 0u);
    let q = n / f;
    if (slice < q) {
      var a = part4[t] + part4[t + q * COLS];
      var b = part_qk[t] + part_qk[t + q * COLS];
      if (f == 4u) {
        a = a + (part4[t + 2u * q * COLS] + part4[t + 3u * q * COLS]);
        b = b + (part_qk[t + 2u * q * COLS] + part_qk[t + 3u * q * COLS]);
      }
      part4[t] = a;
      part_qk[t] = b;
    }
    n = q;
    workgroupBarrier();
  }
  sums = part4[col];
  qk = part_qk[col];
  let q_scale = 1.0 / (max(sqrt(sums.z), p.eps) * sqrt(f32(p.dk)));
  let k_scale = 1.0 / max(sqrt(sums.w), p.eps);
  if (OUT_SQ && t == 0u) {
    // every column's o again, from the sums the tree left (the same arithmetic as its slice-0 lane's below):
    // no barrier more to collect them
    var sq = 0.0;
    for (var c = 0u; c < COLS; c++) {
      if (wg.x * COLS + c < p.dv) {
        let s = part4[c];
        let qs = 1.0 / (max(sqrt(s.z), p.eps) * sqrt(f32(p.dk)));
        let ks = 1.0 / max(sqrt(s.w), p.eps);
        let o = qs * (s.y + ks * ((v_cols[c] - s.x * ks) * beta) * part_qk[c]);
        sq += o * o;
      }
    }
    out_sq(h, wg.x, sq);
  }
  if (live) {
    let d = (v_in - sums.x * k_scale) * beta;
    let kd = k_scale * d;
    for (var r = 0u; r < MAX_ROWS; r++) {
      let i = slice + r * SLICES;
      if (i < p.dk) {
        state[sb + i * p.dv] = rows[r] + k_sh[i] * kd;
      }
    }
    if (slice == 0u) {
      out[h * p.dv + j] = q_scale * (sums.y + kd * qk) * out_w;
      conv_keep(v_at, dn[p.x_base + v_at], step.pos);
    }
  }
  if (wg.x == 0u && h < p.n_k_heads) {  // h = kh: the first value head of this key head
    for (var i = t; i < p.dk; i += WG) {
      let q_at = p.q_base + h * p.dk + i;
      let k_at = p.k_base + h * p.dk + i;
      conv_keep(q_at, dn[p.x_base + q_at], step.pos);
      conv_keep(k_at, dn[p.x_base + k_at], step.pos);
    }
  }
}
