// gemma4's attention inputs for one decode token in one dispatch (llama.cpp gemma4-iswa.cpp): per q head RMSNorm
// with q_norm then NeoX RoPE, written to q[h · hd]; per KV head RMSNorm with k_norm then RoPE for K, RMSNorm without
// a weight for V (global layers have no V projection: v_base = k_base, V is the raw K projection), both appended to
// the layer's caches at row step.pos % p.rows (a sliding-window layer's cache is a ring of p.rows rows; a global
// layer's holds every position). use_freqs = 1 ("proportional" RoPE of the global layers): pair i's angle is
// divided by freqs[i] (the rope_freqs tensor, ggml_rope_ext's freq_factors). Workgroups (n_head + n_kv, rows), 64
// lanes. chunked = 0: one row, the decode token at step.pos; 1: a prefill chunk's rows t < chunk.n at positions
// chunk.pos0 + t (the chunk uniform bound as `step`: chunk.wgsl keeps n where Step keeps token and pos0 where it
// keeps pos), row t of x at t · x_stride and of q at t · q_stride.
#include "step.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params {
  hd: u32, n_rot: u32, eps: f32, base: f32, n_head: u32, n_kv: u32, k_base: u32, v_base: u32,
  rows: u32, use_freqs: u32, chunked: u32, x_stride: u32, q_stride: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> q_norm: array<f32>;
@group(0) @binding(3) var<storage, read> k_norm: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> q: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<KvWord>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<KvWord>;
@group(0) @binding(8) var<storage, read> freqs: array<f32>;

var<workgroup> hv: array<f32, 512>;  // one head of up to 512 values (gemma4's global layers)
const SUM_LANES: u32 = 64u;
#include "workgroup_sum.wgsl"
#include "rope_angle.wgsl"

// hv = x[src ..] / sqrt(mean(x²) + eps), times the q or k norm's weight (kind 0: q, 1: k, 2: none).
var<private> x_row: u32;   // this workgroup's row of x

fn load_normed(t: u32, src: u32, kind: u32) {
  var acc = 0.0;
  for (var i = t; i < p.hd; i += 64u) {
    let v = x[x_row + src + i];
    hv[i] = v;
    acc += v * v;
  }
  let inv = 1.0 / sqrt(workgroup_sum(acc, t) / f32(p.hd) + p.eps);
  for (var i = t; i < p.hd; i += 64u) {
    var w = 1.0;
    if (kind == 0u) {
      w = q_norm[i];
    } else if (kind == 1u) {
      w = k_norm[i];
    }
    hv[i] = hv[i] * inv * w;
  }
  workgroupBarrier();
}

// NeoX RoPE of hv's pairs (i, i + n_rot/2) at position pos; each lane turns its own pairs.
fn rotate(t: u32, pos: u32) {
  let half = p.n_rot / 2u;
  for (var i = t; i < half; i += 64u) {
    var ang = f32(pos) * pow(p.base, -2.0 * f32(i) / f32(p.n_rot));
    if (p.use_freqs != 0u) {
      ang = ang / freqs[i];
    }
    let k = round(ang / TWO_PI_HI);
    ang = (ang - k * TWO_PI_HI) - k * TWO_PI_LO;
    let c = cos(ang);
    let s = sin(ang);
    let x0 = hv[i];
    let x1 = hv[i + half];
    hv[i] = x0 * c - x1 * s;
    hv[i + half] = x0 * s + x1 * c;
  }
  workgroupBarrier();
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  if (p.chunked != 0u && wg.y >= step.token) {
    return;   // a row of the chunk past its tokens
  }
  let pos = step.pos + wg.y;
  x_row = wg.y * p.x_stride;
  if (wg.x < p.n_head) {
    load_normed(t, wg.x * p.hd, 0u);
    rotate(t, pos);
    for (var i = t; i < p.hd; i += 64u) {
      q[wg.y * p.q_stride + wg.x * p.hd + i] = hv[i];
    }
    return;
  }
  let j = wg.x - p.n_head;   // the KV head
  let half = p.hd / 2u;
  let row = (pos % p.rows) * p.n_kv * half + j * half;
  load_normed(t, p.k_base + j * p.hd, 1u);
  rotate(t, pos);
  for (var m = t; m < half; m += 64u) {
    k_cache[row + m] = kv_pack(vec2<f32>(hv[2u * m], hv[2u * m + 1u]));
  }
  workgroupBarrier();
  load_normed(t, p.v_base + j * p.hd, 2u);
  for (var m = t; m < half; m += 64u) {
    v_cache[row + m] = kv_pack(vec2<f32>(hv[2u * m], hv[2u * m + 1u]));
  }
}
