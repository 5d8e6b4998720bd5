// The gated delta rule over a prefill chunk: gdn_recurrent.wgsl's update for rows t = 0 .. chunk.n - 1 in order,
// in one dispatch (the recurrence is sequential in t; each invocation owns one value column j of a head's state S,
// so only the shared q/k of each row need barriers). Row t reads q|k|v at qkv[t·qkv_stride + {q,k,v}_base],
// beta_raw | alpha_raw at gates[t·gates_stride], and writes o at out[t·out_stride + h·dv + j]. A row at
// position 0 starts a sequence (the stored S reads as zeros). Workgroups: (ceil(dv / 64), n_v_heads).
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

const WG: u32 = 64u;
const MAX_DK: u32 = 256u;
var<workgroup> q_sh: array<f32, MAX_DK>;
var<workgroup> k_sh: array<f32, MAX_DK>;
var<workgroup> red_q: array<f32, WG>;
var<workgroup> red_k: array<f32, WG>;

#include "gdn_qk_norm.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.y;
  let kh = h % p.n_k_heads;
  let j = wg.x * WG + t;
  let sb = h * p.dk * p.dv + j;
  for (var r = 0u; r < chunk.n; r++) {
    let xb = r * p.qkv_stride;
    let scales = load_qk(t, xb + p.q_base + kh * p.dk, xb + p.k_base + kh * p.dk);
    let q_scale = scales.x;
    let k_scale = scales.y;
    if (j < p.dv) {
      let gb = r * p.gates_stride;
      let beta = 1.0 / (1.0 + exp(-gates[gb + h]));
      let decay = exp(softplus(gates[gb + p.n_v_heads + h] + dt_bias[h]) * ssm_a[h]);
      let fresh = chunk.pos0 + r == 0u;
      var s_k = 0.0;
      if (!fresh) {
        for (var i = 0u; i < p.dk; i++) {
          s_k += state[sb + i * p.dv] * k_sh[i];
        }
      }
      s_k *= decay * k_scale;
      let d = (qkv[xb + p.v_base + h * p.dv + j] - s_k) * beta;
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
      out[r * p.out_stride + h * p.dv + j] = o * q_scale;
    }
    workgroupBarrier();  // every lane is done with this row's q/k before the next row overwrites them
  }
}
