// Decode attention of one token over the cached positions [0, step.n_past), grouped-query: q head h reads KV head
// h / (n_head / n_kv_head). One workgroup of 256 per q head. Positions go in chunks of 64 with an online softmax
// (running max and sum), so any context length up to the cache size works with fixed memory.
// out[h * hd + d] = Σ_t softmax_t(scale · q_h·k_t) · v_t[d]   (llama.cpp's soft_max_ext with kq_scale, no mask
// needed for one new token: every cached position is visible).
// Why this shape: a lane per position walking a whole K row (and a lane per value pair walking every position)
// is one long chain of dependent, scattered loads per lane. Here 8 neighbouring lanes share a K row (adjacent
// words: coalesced) and each value pair is split over two lanes, so a lane issues ~8x fewer loads per chunk.
#include "step.wgsl"
#include "kv_{{KV}}.wgsl"
struct Params { n_head: u32, n_kv_head: u32, hd: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> q: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read> v_cache: array<KvWord>;
@group(0) @binding(5) var<storage, read_write> out: array<vec2<f32>>;

const WG: u32 = 256u;
const CHUNK: u32 = 64u;
const KLANES: u32 = 8u;                  // lanes sharing one position's q·k
const KROWS: u32 = WG / KLANES;          // positions per q·k pass (32); CHUNK / KROWS passes per chunk
const VSPLIT: u32 = 2u;                  // lanes sharing one value pair (even / odd positions); 128 pairs max
var<workgroup> q_sh: array<vec2<f32>, 128>;
var<workgroup> red: array<f32, WG>;
var<workgroup> score: array<f32, CHUNK>;
var<workgroup> weight: array<f32, CHUNK>;
var<workgroup> acc_sh: array<vec2<f32>, WG>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.x;
  let pairs = p.hd / 2u;
  let kvh = h / (p.n_head / p.n_kv_head);
  let row_words = p.n_kv_head * pairs;
  let head_word = kvh * pairs;
  for (var j = t; j < pairs; j += WG) {
    q_sh[j] = q[h * pairs + j];
  }
  workgroupBarrier();

  let n = step.n_past;
  let klane = t % KLANES;
  let pj = t % (WG / VSPLIT);            // this lane's value pair
  let vpart = t / (WG / VSPLIT);         // ... over positions j ≡ vpart (mod VSPLIT) of each chunk
  var m = -3.0e38;
  var l = 0.0;
  var acc = vec2<f32>(0.0, 0.0);
  for (var c = 0u; c < n; c += CHUNK) {
    for (var kp = 0u; kp < CHUNK / KROWS; kp++) {
      let li = kp * KROWS + t / KLANES;
      let pos = c + li;
      var d = 0.0;
      if (pos < n) {
        let kb = pos * row_words + head_word;
        for (var j = klane; j < pairs; j += KLANES) {
          d += dot(q_sh[j], kv_unpack(k_cache[kb + j]));
        }
      }
      red[t] = d;
      workgroupBarrier();
      for (var s = KLANES / 2u; s > 0u; s >>= 1u) {
        if (klane < s) {
          red[t] += red[t + s];
        }
        workgroupBarrier();
      }
      if (klane == 0u) {
        score[li] = select(-3.0e38, red[t] * p.scale, pos < n);
      }
      workgroupBarrier();
    }
    var cm = m;
    for (var j = 0u; j < CHUNK; j++) {
      cm = max(cm, score[j]);
    }
    if (t < CHUNK) {
      weight[t] = select(0.0, exp(score[t] - cm), c + t < n);
    }
    workgroupBarrier();
    let corr = exp(m - cm);
    l *= corr;
    let cn = min(CHUNK, n - c);
    for (var j = 0u; j < cn; j++) {
      l += weight[j];
    }
    if (pj < pairs) {
      var a = acc * corr;
      for (var j = vpart; j < cn; j += VSPLIT) {
        a += weight[j] * kv_unpack(v_cache[(c + j) * row_words + head_word + pj]);
      }
      acc = a;
    }
    m = cm;
    workgroupBarrier();
  }
  acc_sh[t] = acc;
  workgroupBarrier();
  if (t < WG / VSPLIT && pj < pairs) {
    out[h * pairs + pj] = (acc_sh[t] + acc_sh[t + WG / VSPLIT]) / l;
  }
}
