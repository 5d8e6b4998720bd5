// Causal attention of a prefill chunk: query row t < chunk.n (position pos0 + t) over cache positions
// [0, pos0 + t] — the chunk's K/V rows are appended before this runs, so the causal mask is the row's length.
// Grouped-query and chunked online softmax exactly as attention.wgsl, per head the same operations in the same
// order. One workgroup of 64 per (row, hg query heads of one KV head): each K and V word is loaded once for the hg
// heads that share it (hg = heads_per_wg <= 8, hg · hd / 2 <= 1024), where a workgroup per head loaded it hg times.
// Workgroups: (n_kv_head · ceil(group / hg), T); group = n_head / n_kv_head.
// q row t starts at q[t·q_stride], output row t at out[t·out_stride] (element offsets, even).
#include "chunk.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params { n_head: u32, n_kv_head: u32, hd: u32, scale: f32, q_stride: u32, out_stride: u32, heads_per_wg: u32,
                pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> q: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read> v_cache: array<KvWord>;
@group(0) @binding(5) var<storage, read_write> out: array<vec2<f32>>;

const CHUNK: u32 = 64u;
const MAX_PAIRS_PER_LANE: u32 = 2u;
const HG: u32 = 8u;  // most heads per workgroup
var<workgroup> q_sh: array<vec2<f32>, 1024>;  // [head][pair]
var<workgroup> score: array<f32, HG * CHUNK>;   // [head][key]
var<workgroup> weight: array<f32, HG * CHUNK>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let row = wg.y;
  if (row >= chunk.n) {
    return;
  }
  let pairs = p.hd / 2u;
  let group = p.n_head / p.n_kv_head;
  let per_kv = (group + p.heads_per_wg - 1u) / p.heads_per_wg;
  let kvh = wg.x / per_kv;
  let h0 = kvh * group + (wg.x % per_kv) * p.heads_per_wg;  // this workgroup's first query head
  let hg = min(p.heads_per_wg, (kvh + 1u) * group - h0);
  let row_words = p.n_kv_head * pairs;
  let head_word = kvh * pairs;
  let qb = row * p.q_stride / 2u + h0 * pairs;
  for (var j = t; j < hg * pairs; j += 64u) {
    q_sh[j] = q[qb + j];
  }
  workgroupBarrier();

  let n = chunk.pos0 + row + 1u;
  var m: array<f32, HG>;
  var l: array<f32, HG>;
  var acc: array<vec2<f32>, HG * MAX_PAIRS_PER_LANE>;  // [head][pair slot]
  for (var i = 0u; i < HG; i++) {
    m[i] = -3.0e38;
  }
  for (var c = 0u; c < n; c += CHUNK) {
    let pos = c + t;
    var s = array<f32, HG>();
    for (var i = 0u; i < HG; i++) {
      s[i] = -3.0e38;
    }
    if (pos < n) {
      let kb = pos * row_words + head_word;
      var d = array<f32, HG>();  // zeroed explicitly: a loop-body var may keep the last iteration's values
      for (var j = 0u; j < pairs; j++) {
        let kw = kv_unpack(k_cache[kb + j]);
        for (var i = 0u; i < HG; i++) {
          if (i < hg) {
            d[i] += dot(q_sh[i * pairs + j], kw);
          }
        }
      }
      for (var i = 0u; i < HG; i++) {
        s[i] = d[i] * p.scale;
      }
    }
    for (var i = 0u; i < HG; i++) {
      score[i * CHUNK + t] = s[i];
    }
    workgroupBarrier();
    var cm = array<f32, HG>();
    for (var i = 0u; i < HG; i++) {
      if (i < hg) {
        var mx = m[i];
        for (var j = 0u; j < CHUNK; j++) {
          mx = max(mx, score[i * CHUNK + j]);
        }
        cm[i] = mx;
        var e = 0.0;
        if (pos < n) {
          e = exp(s[i] - mx);
        }
        weight[i * CHUNK + t] = e;
      }
    }
    workgroupBarrier();
    let cn = min(CHUNK, n - c);
    var corr = array<f32, HG>();
    for (var i = 0u; i < HG; i++) {
      if (i < hg) {
        corr[i] = exp(m[i] - cm[i]);
        var li = l[i] * corr[i];
        for (var j = 0u; j < cn; j++) {
          li += weight[i * CHUNK + j];
        }
        l[i] = li;
      }
    }
    for (var pi = 0u; pi < MAX_PAIRS_PER_LANE; pi++) {
      let pj = t + pi * 64u;
      if (pj < pairs) {
        var a = array<vec2<f32>, HG>();
        for (var i = 0u; i < HG; i++) {
          a[i] = acc[i * MAX_PAIRS_PER_LANE + pi] * corr[i];
        }
        for (var j = 0u; j < cn; j++) {
          let vw = kv_unpack(v_cache[(c + j) * row_words + head_word + pj]);
          for (var i = 0u; i < HG; i++) {
            if (i < hg) {
              a[i] += weight[i * CHUNK + j] * vw;
            }
          }
        }
        for (var i = 0u; i < HG; i++) {
          acc[i * MAX_PAIRS_PER_LANE + pi] = a[i];
        }
      }
    }
    for (var i = 0u; i < HG; i++) {
      m[i] = cm[i];
    }
    workgroupBarrier();
  }
  let ob = row * p.out_stride / 2u + h0 * pairs;
  for (var i = 0u; i < HG; i++) {
    if (i < hg) {
      for (var pi = 0u; pi < MAX_PAIRS_PER_LANE; pi++) {
        let pj = t + pi * 64u;
        if (pj < pairs) {
          out[ob + i * pairs + pj] = acc[i * MAX_PAIRS_PER_LANE + pi] / l[i];
        }
      }
    }
  }
}
