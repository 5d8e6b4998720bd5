// The gated delta rule over a prefill chunk: the one-token update of gdn_conv_recurrent.wgsl for rows t = 0 ..
// chunk.n - 1 in order, in one dispatch, the state S kept in registers for the whole chunk (read once before row 0,
// written once after the last row). Row t reads q|k|v at qkv[t·qkv_stride + {q,k,v}_base], beta_raw | alpha_raw at
// gates[t·gates_stride], the q and k scales and q·k at scales[t · n_k_heads + kh] (gdn_qk_scales.wgsl, for all rows
// ahead), and writes o at out[t·out_stride + h·dv + j]; S is key-major, S[h][i][j] at state[(h·dk + i)·dv + j].
// A chunk starting at position 0 starts a sequence (the stored S reads as zeros).
// Workgroups of one subgroup's width: SL neighbouring lanes share a value column j, each keeping DK / SL consecutive
// key rows of S[:, j] as vec4s, and a workgroup holds 32 / SL columns. The row loop is sequential by nature and so
// bound by each row's chain of dependent steps: small workgroups and one barrier per row keep that chain short (at
// the real sizes SL = 2 took 0.58x the time of 256-lane workgroups with 8 lanes per column and three barriers per
// row, the layout of the one-token kernel: lab/gpu_probes/gdn_variants.mjs). Per row:
//   partial S·q and S·k over the lane's rows (q and k read from workgroup memory, k kept for the update), the next
//   row's q|k stored into the other buffer (its loads issued a row earlier), barrier; then the column's SL
//   partials summed (written into a buffer per row parity, so one barrier suffices), d, the update, the output:
//   S' = decay·S + (k_scale·k) dᵀ,  d = (v - k_scale·decay·Sᵀk) · beta,
//   o = q_scale · S'ᵀq = q_scale · (decay·Sᵀq + k_scale · d · (q·k))
// (the one-token kernel decays S before its sums: the same values to rounding). DK = the key head size, SL = 2
// where DK % 8 == 0, else 1 (DK % 4 == 0). Workgroups: (ceil(dv / (32 / SL)), n_v_heads).
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
const SL: u32 = {{SL}}u;                    // lanes per value column
const WG: u32 = 32u;
const COLS: u32 = WG / SL;                  // value columns per workgroup
const D4: u32 = DK / 4u;                    // vec4s of a q or k row
const R4: u32 = D4 / SL;                    // vec4s of key rows per lane
const PF: u32 = (2u * DK + WG - 1u) / WG;   // q|k values of a row each lane stages
var<workgroup> qk_sh: array<vec4<f32>, 4u * D4>;  // [row parity][q | k]
var<workgroup> part: array<vec2<f32>, 2u * WG>;   // [row parity][lane]: its partial (S·q, S·k)

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
  let slice = t % SL;
  let c0 = t - slice;                  // the column's first lane
  let j = wg.x * COLS + t / SL;
  let live = j < p.dv;                 // lanes past dv still stage q|k and take part in the barriers
  let jr = min(j, p.dv - 1u);
  let sb = h * DK * p.dv + jr;
  let r0 = slice * R4;                 // this lane's first vec4 of key rows

  var s = array<vec4<f32>, R4>();
  if (live && chunk.pos0 != 0u) {
    for (var r = 0u; r < R4; r++) {
      let i = 4u * (r0 + r);
      s[r] = vec4<f32>(state[sb + i * p.dv], state[sb + (i + 1u) * p.dv], state[sb + (i + 2u) * p.dv],
                       state[sb + (i + 3u) * p.dv]);
    }
  }
  let bias = dt_bias[h];
  let a_log = ssm_a[h];

  // rows 0 and 1's inputs; in the loop, row + 2's are loaded while row computes and row + 1's q|k stored for the
  // next row (two rows ahead: ~1 % less time than one on the H200, the loads' latency further from the row's chain)
  if (chunk.n > 0u) {
    store_qk(0u, load_qk(0u, kh, t), t);
  }
  var staged = array<f32, PF>();
  if (chunk.n > 1u) {
    staged = load_qk(1u, kh, t);
  }
  var vn = array<f32, 2>(qkv[p.v_base + h * p.dv + jr], 0.0);
  var gn = array<vec2<f32>, 2>(vec2<f32>(gates[h], gates[p.n_v_heads + h]), vec2<f32>(0.0));
  var sn = array<vec4<f32>, 2>(scales[kh], vec4<f32>(0.0));
  if (chunk.n > 1u) {
    vn[1] = qkv[p.qkv_stride + p.v_base + h * p.dv + jr];
    gn[1] = vec2<f32>(gates[p.gates_stride + h], gates[p.gates_stride + p.n_v_heads + h]);
    sn[1] = scales[p.n_k_heads + kh];
  }
  workgroupBarrier();

  for (var row = 0u; row < chunk.n; row++) {
    let buf = row & 1u;
    let more = row + 1u < chunk.n;
    let v = vn[0];
    let g = gn[0];
    let sc = sn[0];
    vn[0] = vn[1];
    gn[0] = gn[1];
    sn[0] = sn[1];
    var ahead = array<f32, PF>();
    if (row + 2u < chunk.n) {  // row + 2's inputs, loaded while this row computes
      let r2 = row + 2u;
      ahead = load_qk(r2, kh, t);
      vn[1] = qkv[r2 * p.qkv_stride + p.v_base + h * p.dv + jr];
      gn[1] = vec2<f32>(gates[r2 * p.gates_stride + h], gates[r2 * p.gates_stride + p.n_v_heads + h]);
      sn[1] = scales[r2 * p.n_k_heads + kh];
    }

    let qb = buf * 2u * D4 + r0;
    var kr = array<vec4<f32>, R4>();   // zeroed explicitly: a loop-body var may keep the last iteration's values
    var sq = vec4<f32>(0.0);
    var sk = vec4<f32>(0.0);
    for (var r = 0u; r < R4; r++) {
      kr[r] = qk_sh[qb + D4 + r];
      sq = fma(s[r], qk_sh[qb + r], sq);
      sk = fma(s[r], kr[r], sk);
    }
    part[buf * WG + t] = vec2<f32>((sq.x + sq.y) + (sq.z + sq.w), (sk.x + sk.y) + (sk.z + sk.w));
    if (more) {
      store_qk(buf ^ 1u, staged, t);   // the other buffer: its last reads were before the previous row's barrier
    }
    staged = ahead;
    let beta = 1.0 / (1.0 + exp(-g.x));
    let decay = exp(softplus(g.y + bias) * a_log);
    workgroupBarrier();

    var sums = vec2<f32>(0.0);
    for (var l = 0u; l < SL; l++) {
      sums += part[buf * WG + c0 + l];
    }
    let sum_q = decay * sums.x;
    let sum_k = decay * sums.y;
    let k_scale = sc.y;
    let d = (v - sum_k * k_scale) * beta;
    let kd = vec4<f32>(k_scale * d);
    for (var r = 0u; r < R4; r++) {
      s[r] = fma(s[r], vec4<f32>(decay), kd * kr[r]);
    }
    if (live && slice == 0u) {
      out[row * p.out_stride + h * p.dv + j] = (sum_q + k_scale * d * sc.z) * sc.x;
    }
  }

  if (live) {
    for (var r = 0u; r < R4; r++) {
      let i = 4u * (r0 + r);
      state[sb + i * p.dv] = s[r].x;
      state[sb + (i + 1u) * p.dv] = s[r].y;
      state[sb + (i + 2u) * p.dv] = s[r].z;
      state[sb + (i + 3u) * p.dv] = s[r].w;
    }
  }
}
