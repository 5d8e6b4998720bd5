// Gated DeltaNet recurrence for one token (llama.cpp build_delta_net_autoregressive on the qwen35moe layer's
// q, k, v after the conv + SiLU). Per value head h, reading key head kh = h % n_k_heads (llama.cpp repeats the key
// heads tiled, ggml_repeat_4d):
//   q, k   = l2norm(q_kh), l2norm(k_kh)       l2norm(x) = x / max(||x||, eps)    (ggml_l2_norm: eps is a floor)
//   q     *= 1 / sqrt(dk)
//   beta   = sigmoid(beta_raw[h]);  g = softplus(alpha_raw[h] + dt_bias[h]) · ssm_a[h]
//   S     *= exp(g);  d = beta · (v − Sᵀk);  S += k ⊗ d;  o = Sᵀq
// S of a head is dk × dv, stored key-major (state[h][i][j], i = key index, j = value index) so that neighbouring
// invocations (neighbouring j) read neighbouring words. Each invocation owns one value column j of S: the update
// of a column needs only that column, so no synchronisation is needed after the shared q/k set-up.
// Position 0 starts a sequence: the stored S is read as zeros (no clearing pass).
// Workgroups: (ceil(dv / 64), n_v_heads). Correct for any subgroup size (no subgroup operations).
#include "step.wgsl"
struct Params {
  n_k_heads: u32, n_v_heads: u32, dk: u32, dv: u32,
  q_base: u32, k_base: u32, v_base: u32, eps: f32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;       // conv output: q | k | v
@group(0) @binding(3) var<storage, read> gates: array<f32>;     // beta_raw[n_v] | alpha_raw[n_v]
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(5) var<storage, read> ssm_a: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;  // o[h * dv + j]

const WG: u32 = 64u;
const MAX_DK: u32 = 256u;
var<workgroup> q_sh: array<f32, MAX_DK>;
var<workgroup> k_sh: array<f32, MAX_DK>;
var<workgroup> red_q: array<f32, WG>;
var<workgroup> red_k: array<f32, WG>;

fn softplus(x: f32) -> f32 {
  // log(1 + e^x); above 20 it equals x in f32 (and e^x would overflow further up)
  if (x > 20.0) {
    return x;
  }
  return log(1.0 + exp(x));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.y;
  let kh = h % p.n_k_heads;
  var sq = 0.0;
  var sk = 0.0;
  for (var i = t; i < p.dk; i += WG) {
    let qv = qkv[p.q_base + kh * p.dk + i];
    let kv = qkv[p.k_base + kh * p.dk + i];
    q_sh[i] = qv;
    k_sh[i] = kv;
    sq += qv * qv;
    sk += kv * kv;
  }
  red_q[t] = sq;
  red_k[t] = sk;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      red_q[t] += red_q[t + s];
      red_k[t] += red_k[t + s];
    }
    workgroupBarrier();
  }
  let q_scale = 1.0 / (max(sqrt(red_q[0]), p.eps) * sqrt(f32(p.dk)));
  let k_scale = 1.0 / max(sqrt(red_k[0]), p.eps);

  let j = wg.x * WG + t;
  if (j >= p.dv) {
    return;
  }
  let beta = 1.0 / (1.0 + exp(-gates[h]));
  let decay = exp(softplus(gates[p.n_v_heads + h] + dt_bias[h]) * ssm_a[h]);
  let sb = h * p.dk * p.dv + j;
  let fresh = step.pos == 0u;

  // Sᵀk for column j, after the decay
  var s_k = 0.0;
  if (!fresh) {
    for (var i = 0u; i < p.dk; i++) {
      s_k += state[sb + i * p.dv] * k_sh[i];
    }
  }
  s_k *= decay * k_scale;
  let d = (qkv[p.v_base + h * p.dv + j] - s_k) * beta;
  var o = 0.0;
  for (var i = 0u; i < p.dk; i++) {
    var s = 0.0;
    if (!fresh) {
      s = state[sb + i * p.dv] * decay;
    }
    s += k_sh[i] * k_scale * d;
    state[sb + i * p.dv] = s;
    o += s * q_sh[i];
  }
  out[h * p.dv + j] = o * q_scale;
}
