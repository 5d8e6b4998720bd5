// attention.wgsl's inputs straight from the q/k/v product x, qk_rope_append.wgsl's work done in the attention's own
// workgroups: each norms (q_norm) and rotates (NeoX RoPE at step.pos) its q head, read at x[h · q_stride]; a split
// whose positions hold step.pos does the same for its KV head's k (k_norm; x[k_base ..]), packs it and v
// (x[v_base ..]) into KV words and uses those for that position instead of the cache's row, which other workgroups
// of this dispatch may not see written. The last q head of each KV group writes that row (the cache's layout:
// [pos][kv head][pair]): the last, so that on an adapter that runs workgroups in order the others would read the
// stale row if they took it, and the kernel test would see it. The arithmetic is head_norm_rope.wgsl's (the same
// per-lane sums of 4, the same tree over 64 lanes, the same products in the same order), so q and the new row have
// the bits the two dispatches give.
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<KvWord>;
@group(0) @binding(6) var<storage, read> q_norm: array<f32>;
@group(0) @binding(7) var<storage, read> k_norm: array<f32>;
#include "rope_angle.wgsl"

const NORM_LANES: u32 = 64u;                  // head_norm_rope.wgsl's lanes: its sums' order
var<workgroup> hq: array<f32, 256>;
var<workgroup> hk: array<f32, 256>;
var<workgroup> sq: array<vec2<f32>, NORM_LANES>;   // (q, k) sums of squares
var<workgroup> k_new: array<KvWord, 128>;
var<workgroup> v_new: array<KvWord, 128>;
var<private> new_pos: u32;                    // step.pos where this split holds it, else none

fn stage_q(t: u32, h: u32, kvh: u32, start: u32, end: u32) {
  let hd = p.hd;
  let pairs = hd / 2u;
  let half = p.n_rot / 2u;
  let has_new = start <= step.pos && step.pos < end;   // the same for every lane
  new_pos = select(0xffffffffu, step.pos, has_new);
  let use_norm = p.use_norm != 0u;
  // the loads first, independent of each other: the raw heads, v's pair, the norms' weights this lane applies
  if (t < hd) {
    hq[t] = x[h * p.q_stride + t];
    if (has_new) {
      hk[t] = x[p.k_base + kvh * hd + t];
    }
  }
  if (has_new && t < pairs) {
    let vb = p.v_base + kvh * hd + 2u * t;
    v_new[t] = kv_pack(vec2<f32>(x[vb], x[vb + 1u]));
  }
  var wq = vec2<f32>(1.0);   // lane t < half: dims t and t + half; n_rot <= t < hd: dim t
  var wk = vec2<f32>(1.0);
  if (use_norm) {
    if (t < half) {
      wq = vec2<f32>(q_norm[t], q_norm[t + half]);
      wk = vec2<f32>(k_norm[t], k_norm[t + half]);
    } else if (t >= p.n_rot && t < hd) {
      wq.x = q_norm[t];
      wk.x = k_norm[t];
    }
  }
  workgroupBarrier();
  var inv = vec2<f32>(1.0);
  if (use_norm) {
    // workgroup_sum.wgsl's tree over 64 lanes, for q and k at once
    if (t < NORM_LANES) {
      var acc = vec2<f32>(0.0);
      for (var i = t; i < hd; i += NORM_LANES) {
        let v = vec2<f32>(hq[i], hk[i]);
        acc += v * v;
      }
      sq[t] = acc;
    }
    workgroupBarrier();
    var s = NORM_LANES / 2u;
    for (; s > 1u; s >>= 2u) {
      let hh = s / 2u;
      if (t < hh) {
        sq[t] = (sq[t] + sq[t + s]) + (sq[t + hh] + sq[t + hh + s]);
      }
      workgroupBarrier();
    }
    if (s == 1u) {
      if (t == 0u) {
        sq[0] += sq[1];
      }
      workgroupBarrier();
    }
    inv = 1.0 / sqrt(sq[0] / f32(hd) + p.eps);
  }
  // each lane writes only the dims it read: t and t + half (rotated), or t >= n_rot (normed only)
  if (t < half) {
    let ang = rope_angle(f32(step.pos), t, p.n_rot, p.base);
    let c = cos(ang);
    let s = sin(ang);
    let q0 = hq[t] * inv.x * wq.x;
    let q1 = hq[t + half] * inv.x * wq.y;
    hq[t] = q0 * c - q1 * s;
    hq[t + half] = q0 * s + q1 * c;
    if (has_new) {
      let k0 = hk[t] * inv.y * wk.x;
      let k1 = hk[t + half] * inv.y * wk.y;
      hk[t] = k0 * c - k1 * s;
      hk[t + half] = k0 * s + k1 * c;
    }
  } else if (use_norm && t >= p.n_rot && t < hd) {
    hq[t] = hq[t] * inv.x * wq.x;
    if (has_new) {
      hk[t] = hk[t] * inv.y * wk.x;
    }
  }
  workgroupBarrier();
  if (t < pairs) {
    q_sh[t] = vec2<f32>(hq[2u * t], hq[2u * t + 1u]);
    if (has_new) {
      let kw = kv_pack(vec2<f32>(hk[2u * t], hk[2u * t + 1u]));
      k_new[t] = kw;
      let group = p.n_head / p.n_kv_head;
      if (h % group == group - 1u) {
        let row = step.pos * p.n_kv_head * pairs + kvh * pairs;
        k_cache[row + t] = kw;
        v_cache[row + t] = v_new[t];
      }
    }
  }
}

// the token's own position: its K/V words from this workgroup, not the cache (the caller's barrier after
// stage_q makes k_new and v_new visible)
fn k_word(pos: u32, j: u32, w: KvWord) -> KvWord {
  return select(w, k_new[j], pos == new_pos);
}

fn v_word(pos: u32, j: u32, w: KvWord) -> KvWord {
  return select(w, v_new[j], pos == new_pos);
}
