// Causal attention of a prefill chunk: query row t < chunk.n (position pos0 + t) over cache positions
// [0, pos0 + t] — the chunk's K/V rows are appended before this runs, so the causal mask is the row's length.
// Grouped-query, chunked online softmax as attention.wgsl. One workgroup per (row, hg query heads of one KV head):
// each K and V word is loaded once for the hg heads that share it (hg = heads_per_wg <= 8, hg · hd / 2 <= 1024).
// The workgroup is SPLIT parts of 64 lanes; part g takes the row's 64-position blocks g, g + SPLIT, ... with its own
// running max, sum and output (SPLIT times the lanes at work on a GPU, where one part per row left most of it
// idle), and the parts' states are merged at the end (the max of the maxima, each part's sum and output rescaled
// to it). SPLIT = 1 keeps one part (a CPU adapter pays for every invocation).
// Workgroups: (n_kv_head · ceil(group / hg), T); group = n_head / n_kv_head.
// q row t starts at q[t·q_stride], output row t at out[t·out_stride] (element offsets, even).
// SPAN: the positions and their cache rows (attention_span_all.wgsl: [0, pos0 + t], row = position;
// attention_span_window.wgsl: the window's last positions in a ring of rows, gemma4's sliding-window layers).
#include "chunk.wgsl"
#include "kv_{{KV}}.wgsl"
#include "attention_span_{{SPAN}}.wgsl"
struct Params { n_head: u32, n_kv_head: u32, hd: u32, scale: f32, q_stride: u32, out_stride: u32, heads_per_wg: u32,
                pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> q: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read> v_cache: array<KvWord>;
@group(0) @binding(5) var<storage, read_write> out: array<vec2<f32>>;

const CHUNK: u32 = 64u;
const SPLIT: u32 = {{SPLIT}}u;
const MAX_PAIRS_PER_LANE: u32 = {{PAIRS_PER_LANE}}u;  // 2 (head dim up to 256), 4 (512: gemma4's global layers)
const HG: u32 = 8u;  // most heads per workgroup
const NEG: f32 = -3.0e38;
var<workgroup> q_sh: array<vec2<f32>, 1024>;  // [head][pair]; at the end, a part's rescaled output
var<workgroup> sw: array<f32, SPLIT * HG * CHUNK>;  // [part][head][key]: scores, then their weights

@compute @workgroup_size(64 * SPLIT)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wg.y;
  if (row >= chunk.n) {
    return;
  }
  let t = lid.x % CHUNK;
  let part = lid.x / CHUNK;
  let pairs = p.hd / 2u;
  let group = p.n_head / p.n_kv_head;
  let per_kv = (group + p.heads_per_wg - 1u) / p.heads_per_wg;
  let kvh = wg.x / per_kv;
  let h0 = kvh * group + (wg.x % per_kv) * p.heads_per_wg;  // this workgroup's first query head
  let hg = min(p.heads_per_wg, (kvh + 1u) * group - h0);
  let row_words = p.n_kv_head * pairs;
  let head_word = kvh * pairs;
  let qb = row * p.q_stride / 2u + h0 * pairs;
  for (var j = lid.x; j < hg * pairs; j += 64u * SPLIT) {
    q_sh[j] = q[qb + j];
  }
  workgroupBarrier();

  let n = chunk.pos0 + row + 1u;
  let sb = part * HG * CHUNK;  // this part's scores / weights
  var m: array<f32, HG>;
  var l: array<f32, HG>;
  var acc: array<vec2<f32>, HG * MAX_PAIRS_PER_LANE>;  // [head][pair slot]
  for (var i = 0u; i < HG; i++) {
    m[i] = NEG;
  }
  let first = span_first(n);
  let rounds = (n - first + CHUNK * SPLIT - 1u) / (CHUNK * SPLIT);
  for (var r = 0u; r < rounds; r++) {
    let c = first + (r * SPLIT + part) * CHUNK;  // this part's block
    let pos = c + t;
    var s = array<f32, HG>();
    for (var i = 0u; i < HG; i++) {
      s[i] = NEG;
    }
    if (pos < n) {
      let kb = cache_row(pos) * row_words + head_word;
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
      sw[sb + i * CHUNK + t] = s[i];
    }
    workgroupBarrier();
    var cm = array<f32, HG>();
    for (var i = 0u; i < HG; i++) {
      var mx = m[i];
      for (var j = 0u; j < CHUNK; j++) {
        mx = max(mx, sw[sb + i * CHUNK + j]);
      }
      cm[i] = mx;
    }
    workgroupBarrier();  // every lane has read the scores before they become weights
    for (var i = 0u; i < HG; i++) {
      var e = 0.0;
      if (pos < n && i < hg) {
        e = exp(s[i] - cm[i]);
      }
      sw[sb + i * CHUNK + t] = e;
    }
    workgroupBarrier();
    var cn = 0u;
    if (c < n) {
      cn = min(CHUNK, n - c);
    }
    var corr = array<f32, HG>();
    for (var i = 0u; i < HG; i++) {
      corr[i] = exp(m[i] - cm[i]);
      var li = l[i] * corr[i];
      for (var j = 0u; j < cn; j++) {
        li += sw[sb + i * CHUNK + j];
      }
      l[i] = li;
    }
    for (var pi = 0u; pi < MAX_PAIRS_PER_LANE; pi++) {
      let pj = t + pi * CHUNK;
      if (pj < pairs) {
        var a = array<vec2<f32>, HG>();
        for (var i = 0u; i < HG; i++) {
          a[i] = acc[i * MAX_PAIRS_PER_LANE + pi] * corr[i];
        }
        for (var j = 0u; j < cn; j++) {
          let vw = kv_unpack(v_cache[cache_row(c + j) * row_words + head_word + pj]);
          for (var i = 0u; i < HG; i++) {
            if (i < hg) {
              a[i] += sw[sb + i * CHUNK + j] * vw;
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

  // The parts' states merged: every lane reads each part's max and sum, rescales its own to the common max; the
  // parts' outputs are added into part 0's one part at a time through q_sh (the queries are no longer read).
  for (var i = 0u; i < HG; i++) {
    if (t == 0u) {
      sw[sb + i] = m[i];
      sw[sb + HG + i] = l[i];
    }
  }
  workgroupBarrier();
  var f = array<f32, HG>();  // this part's factor
  var total = array<f32, HG>();  // the merged sum
  for (var i = 0u; i < HG; i++) {
    var mx = NEG;
    for (var g = 0u; g < SPLIT; g++) {
      mx = max(mx, sw[g * HG * CHUNK + i]);
    }
    for (var g = 0u; g < SPLIT; g++) {
      total[i] += sw[g * HG * CHUNK + HG + i] * exp(sw[g * HG * CHUNK + i] - mx);
    }
    f[i] = exp(m[i] - mx);
  }
  for (var g = 1u; g < SPLIT; g++) {
    if (part == g) {
      for (var i = 0u; i < hg; i++) {
        for (var pi = 0u; pi < MAX_PAIRS_PER_LANE; pi++) {
          let pj = t + pi * CHUNK;
          if (pj < pairs) {
            q_sh[i * pairs + pj] = acc[i * MAX_PAIRS_PER_LANE + pi] * f[i];
          }
        }
      }
    }
    workgroupBarrier();
    if (part == 0u) {
      for (var i = 0u; i < hg; i++) {
        for (var pi = 0u; pi < MAX_PAIRS_PER_LANE; pi++) {
          let pj = t + pi * CHUNK;
          if (pj < pairs) {
            let k = i * MAX_PAIRS_PER_LANE + pi;
            if (g == 1u) {
              acc[k] *= f[i];
            }
            acc[k] += q_sh[i * pairs + pj];
          }
        }
      }
    }
    workgroupBarrier();
  }
  if (part != 0u) {
    return;
  }
  let ob = row * p.out_stride / 2u + h0 * pairs;
  for (var i = 0u; i < hg; i++) {
    for (var pi = 0u; pi < MAX_PAIRS_PER_LANE; pi++) {
      let pj = t + pi * CHUNK;
      if (pj < pairs) {
        out[ob + i * pairs + pj] = acc[i * MAX_PAIRS_PER_LANE + pi] / total[i];
      }
    }
  }
}
