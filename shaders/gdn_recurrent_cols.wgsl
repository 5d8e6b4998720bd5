// The gated delta rule over a prefill chunk with one lane per value column: the update of gdn_recurrent_chunk.wgsl
// (same bindings, parameters and workgroup grid) where lane j keeps the whole column S[:, j] (DK values) in
// registers, so a row's column sums S·k and S·q are that lane's own loops and need no exchange between lanes.
// The only barrier per row is for the row's q and k, which the workgroup stages in workgroup memory one row ahead
// (two buffers): the row loop, sequential by nature, is then bound by each lane's arithmetic (~3 DK multiply-adds
// per row, in 4-wide independent chains) instead of the slice layout's three barriers and cross-lane sums per row.
//   S' = decay·S + (k_scale·k) dᵀ,  d = (v - k_scale·decay·Sᵀk) · beta,
//   o = q_scale · S'ᵀq = q_scale · (decay·Sᵀq + k_scale · d · (q·k))
// (the slice kernel decays S before its sums: the same values to rounding). Rows, q/k scales and the chunk start
// as in gdn_recurrent_chunk.wgsl. DK = the key head size (a multiple of 4). Workgroups: (ceil(dv / 32), n_v_heads).
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

#include "softplus.wgsl"

const DK: u32 = {{DK}}u;
const D4: u32 = DK / 4u;
const WG: u32 = 32u;                        // value columns per workgroup, one lane each
const PF: u32 = (2u * DK + WG - 1u) / WG;   // q|k values of a row each lane stages
// [buffer][q | k]: a row's q then k as vec4s, two rows' worth (the row in use, the next being staged)
var<workgroup> qk_sh: array<vec4<f32>, 4u * D4>;

// Lane `t`'s share of row `row`'s q | k (2·DK values: element u < DK is q[u], else k[u - DK]).
fn load_qk(row: u32, kh: u32, t: u32) -> array<f32, PF> {
  var v = array<f32, PF>();
  let xb = row * p.qkv_stride;
  for (var m = 0u; m < PF; m++) {
    let u = t + m * WG;
    if (u < DK) {
      v[m] = qkv[xb + p.q_base + kh * DK + u];
    } else if (u < 2u * DK) {
      v[m] = qkv[xb + p.k_base + kh * DK + u - DK];
    }
  }
  return v;
}

fn store_qk(buf: u32, v: array<f32, PF>, t: u32) {
  for (var m = 0u; m < PF; m++) {
    let u = t + m * WG;
    if (u < 2u * DK) {
      qk_sh[buf * 2u * D4 + u / 4u][u % 4u] = v[m];
    }
  }
}

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.y;
  let kh = h % p.n_k_heads;
  let j = wg.x * WG + t;
  let live = j < p.dv;                 // lanes past dv still stage q|k and take part in the barriers
  let jr = min(j, p.dv - 1u);
  let sb = h * DK * p.dv + jr;

  var s = array<vec4<f32>, D4>();
  if (live && chunk.pos0 != 0u) {
    for (var r = 0u; r < D4; r++) {
      let i = 4u * r;
      s[r] = vec4<f32>(state[sb + i * p.dv], state[sb + (i + 1u) * p.dv], state[sb + (i + 2u) * p.dv],
                       state[sb + (i + 3u) * p.dv]);
    }
  }
  let bias = dt_bias[h];
  let a_log = ssm_a[h];

  if (chunk.n > 0u) {
    store_qk(0u, load_qk(0u, kh, t), t);
  }
  var vn = qkv[p.v_base + h * p.dv + jr];
  var gn = vec2<f32>(gates[h], gates[p.n_v_heads + h]);
  var sn = scales[kh];
  workgroupBarrier();

  for (var row = 0u; row < chunk.n; row++) {
    let buf = row & 1u;
    let more = row + 1u < chunk.n;
    var staged = array<f32, PF>();
    let v = vn;
    let g = gn;
    let sc = sn;
    if (more) {  // the next row's inputs, loaded while this row computes
      staged = load_qk(row + 1u, kh, t);
      let xb = (row + 1u) * p.qkv_stride;
      vn = qkv[xb + p.v_base + h * p.dv + jr];
      let gb = (row + 1u) * p.gates_stride;
      gn = vec2<f32>(gates[gb + h], gates[gb + p.n_v_heads + h]);
      sn = scales[(row + 1u) * p.n_k_heads + kh];
    }
    let beta = 1.0 / (1.0 + exp(-g.x));
    let decay = exp(softplus(g.y + bias) * a_log);

    let qb = buf * 2u * D4;
    var sq = vec4<f32>(0.0);
    var sk = vec4<f32>(0.0);
    for (var r = 0u; r < D4; r++) {
      sq = fma(s[r], qk_sh[qb + r], sq);
      sk = fma(s[r], qk_sh[qb + D4 + r], sk);
    }
    let sum_q = decay * ((sq.x + sq.y) + (sq.z + sq.w));
    let sum_k = decay * ((sk.x + sk.y) + (sk.z + sk.w));
    let k_scale = sc.y;
    let d = (v - sum_k * k_scale) * beta;
    let kd = vec4<f32>(k_scale * d);
    for (var r = 0u; r < D4; r++) {
      s[r] = fma(s[r], vec4<f32>(decay), kd * qk_sh[qb + D4 + r]);
    }
    if (live) {
      out[row * p.out_stride + h * p.dv + j] = (sum_q + k_scale * d * sc.z) * sc.x;
    }
    if (more) {
      store_qk(buf ^ 1u, staged, t);  // the other buffer: last read in the previous row, before its barrier
    }
    workgroupBarrier();
  }

  if (live) {
    for (var r = 0u; r < D4; r++) {
      let i = 4u * r;
      state[sb + i * p.dv] = s[r].x;
      state[sb + (i + 1u) * p.dv] = s[r].y;
      state[sb + (i + 2u) * p.dv] = s[r].z;
      state[sb + (i + 3u) * p.dv] = s[r].w;
    }
  }
}
