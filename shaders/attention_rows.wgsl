// Causal attention of a prefill chunk: query row t < chunk.n (position pos0 + t) over cache positions
// [0, pos0 + t] — the chunk's K/V rows are appended before this runs, so the causal mask is the row's length.
// Grouped-query and chunked online softmax exactly as attention.wgsl (one workgroup of 64 per (head, row)).
// q row t starts at q[t·q_stride], output row t at out[t·out_stride] (element offsets, even).
#include "chunk.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params { n_head: u32, n_kv_head: u32, hd: u32, scale: f32, q_stride: u32, out_stride: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> q: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read> v_cache: array<KvWord>;
@group(0) @binding(5) var<storage, read_write> out: array<vec2<f32>>;

const CHUNK: u32 = 64u;
const MAX_PAIRS_PER_LANE: u32 = 2u;
var<workgroup> q_sh: array<vec2<f32>, 128>;
var<workgroup> score: array<f32, CHUNK>;
var<workgroup> weight: array<f32, CHUNK>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.x;
  let row = wg.y;
  if (row >= chunk.n) {
    return;
  }
  let pairs = p.hd / 2u;
  let kvh = h / (p.n_head / p.n_kv_head);
  let row_words = p.n_kv_head * pairs;
  let head_word = kvh * pairs;
  let qb = row * p.q_stride / 2u + h * pairs;
  for (var j = t; j < pairs; j += 64u) {
    q_sh[j] = q[qb + j];
  }
  workgroupBarrier();

  let n = chunk.pos0 + row + 1u;
  var m = -3.0e38;
  var l = 0.0;
  var acc: array<vec2<f32>, MAX_PAIRS_PER_LANE>;
  for (var c = 0u; c < n; c += CHUNK) {
    let pos = c + t;
    var s = -3.0e38;
    if (pos < n) {
      let kb = pos * row_words + head_word;
      var d = 0.0;
      for (var j = 0u; j < pairs; j++) {
        d += dot(q_sh[j], kv_unpack(k_cache[kb + j]));
      }
      s = d * p.scale;
    }
    score[t] = s;
    workgroupBarrier();
    var cm = m;
    for (var j = 0u; j < CHUNK; j++) {
      cm = max(cm, score[j]);
    }
    var e = 0.0;
    if (pos < n) {
      e = exp(s - cm);
    }
    weight[t] = e;
    workgroupBarrier();
    let corr = exp(m - cm);
    l *= corr;
    let cn = min(CHUNK, n - c);
    for (var j = 0u; j < cn; j++) {
      l += weight[j];
    }
    for (var i = 0u; i < MAX_PAIRS_PER_LANE; i++) {
      let pj = t + i * 64u;
      if (pj < pairs) {
        var a = acc[i] * corr;
        for (var j = 0u; j < cn; j++) {
          a += weight[j] * kv_unpack(v_cache[(c + j) * row_words + head_word + pj]);
        }
        acc[i] = a;
      }
    }
    m = cm;
    workgroupBarrier();
  }
  let ob = row * p.out_stride / 2u + h * pairs;
  for (var i = 0u; i < MAX_PAIRS_PER_LANE; i++) {
    let pj = t + i * 64u;
    if (pj < pairs) {
      out[ob + pj] = acc[i] / l;
    }
  }
}
