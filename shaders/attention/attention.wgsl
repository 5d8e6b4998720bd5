// Decode attention (flash-decoding), pass 1 of 2: the cached positions [0, step.n_past) are split over S
// workgroups per q head, so a long context keeps many cores busy instead of one workgroup per head walking every
// position. With S = 1 (a CPU adapter, a tiny cache) the one split writes the normalised output itself and no
// combine pass runs. Workgroup (h, s) covers positions [s·chunk, min((s+1)·chunk, n)) with chunk = ceil(n / S)
// rounded up to whole 64-position chunks (a split never runs a half-empty chunk; at short contexts the last
// splits get no positions and write a neutral partial). It writes its running max m, sum l = Σ exp(score - m) and the
// unnormalised acc = Σ exp(score - m) · v_t; attention_combine.wgsl merges the S partials of a head.
// Grouped-query: q head h reads KV head h / (n_head / n_kv_head); score = scale · q_h·k_t (llama.cpp's
// soft_max_ext with kq_scale; no mask for one new token: every cached position is visible).
// Within a split, as the single-pass kernel did: positions in chunks of 64 with an online softmax; 8 neighbouring
// lanes share a K row (adjacent words: coalesced loads) and each value pair is split over two lanes (even / odd
// positions), so a lane issues few, independent loads per chunk; it issues 8 of them before it adds their products
// (in the same order): a loop that adds each load before the next one is issued waits for every load in turn, and
// those waits were most of a split's time on the H200 (lab/gpu_probes/step_kernels.mjs).
#include "step.wgsl"
#include "kv_{{KV}}.wgsl"
// SPAN picks the positions and their cache rows: attention_span_all.wgsl (every position at its own row) or
// attention_span_window.wgsl (a sliding window over a ring of rows: gemma4's sliding-window layers).
#include "attention_span_{{SPAN}}.wgsl"
// QIN picks where q and the token's own K/V come from: attention_in_ready.wgsl (q rotated and K/V appended by
// qk_rope_append.wgsl before) or attention_in_rope.wgsl (each workgroup norms and rotates its q head from the q/k/v
// product itself, and the split holding the token's position its K/V: one dispatch fewer per attention layer).
struct Params {
  n_head: u32, n_kv_head: u32, hd: u32, scale: f32, n_split: u32, n_rot: u32, eps: f32, base: f32,
  q_stride: u32, k_base: u32, v_base: u32, use_norm: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
// S > 1: the partials. [0, n_head·S): (m, l) of split (h, s) at h·S + s; then acc: value pair j of split (h, s)
// at n_head·S + (h·S + s)·pairs + j. S = 1: the output, value pair j of head h at h·pairs + j.
@group(0) @binding(5) var<storage, read_write> part: array<vec2<f32>>;

const WG: u32 = 256u;
const CHUNK: u32 = 64u;
const KLANES: u32 = 8u;                  // lanes sharing one position's q·k
const KROWS: u32 = WG / KLANES;          // positions per q·k pass (32); CHUNK / KROWS passes per chunk
const VSPLIT: u32 = 2u;                  // lanes sharing one value pair (even / odd positions)
// value pairs per lane: 1 (up to 128 pairs, head dim 256), 2 (up to 256: gemma4's global layers, head dim 512)
const VSLOTS: u32 = {{VSLOTS}}u;
const NEG: f32 = -3.0e38;                // "no score yet": exp(NEG - any real score) is 0
var<workgroup> q_sh: array<vec2<f32>, 128u * VSLOTS>;
var<workgroup> red: array<f32, WG>;
var<workgroup> score: array<f32, CHUNK>;
var<workgroup> weight: array<f32, CHUNK>;
var<workgroup> acc_sh: array<vec2<f32>, WG>;
#include "attention_in_{{QIN}}.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let h = wg.x;
  let s = wg.y;
  let pairs = p.hd / 2u;
  let slot = h * p.n_split + s;
  let acc_base = p.n_head * p.n_split + slot * pairs;

  let n = step.n_past;
  let first = span_first(n);
  let per = (n - first + p.n_split - 1u) / p.n_split;
  let chunk = (per + CHUNK - 1u) / CHUNK * CHUNK;
  let start = first + min(s * chunk, n - first);
  let end = min(start + chunk, n);
  if (start >= end) {                    // no positions here: a partial that adds nothing in the combine
    for (var j = t; j < pairs; j += WG) {
      part[acc_base + j] = vec2<f32>(0.0, 0.0);
    }
    if (t == 0u) {
      part[slot] = vec2<f32>(NEG, 0.0);
    }
    return;
  }

  let kvh = h / (p.n_head / p.n_kv_head);
  let row_words = p.n_kv_head * pairs;
  let head_word = kvh * pairs;
  stage_q(t, h, kvh, start, end);
  workgroupBarrier();

  let klane = t % KLANES;
  let pj = t % (WG / VSPLIT);            // this lane's value pair
  let vpart = t / (WG / VSPLIT);         // ... over positions j ≡ vpart (mod VSPLIT) of each chunk
  var m = NEG;
  var l = 0.0;
  var acc: array<vec2<f32>, VSLOTS>;
  for (var c = start; c < end; c += CHUNK) {
    for (var kp = 0u; kp < CHUNK / KROWS; kp++) {
      let li = kp * KROWS + t / KLANES;
      let pos = c + li;
      var d = 0.0;
      if (pos < end) {
        let kb = cache_row(pos) * row_words + head_word;
        var j = klane;
        for (; j + 7u * KLANES < pairs; j += 8u * KLANES) {  // 8 loads in flight, then the same sums in order
          var kw: array<KvWord, 8>;
          for (var u = 0u; u < 8u; u++) {
            kw[u] = k_word(pos, j + u * KLANES, k_cache[kb + j + u * KLANES]);
          }
          for (var u = 0u; u < 8u; u++) {
            d += dot(q_sh[j + u * KLANES], kv_unpack(kw[u]));
          }
        }
        for (; j < pairs; j += KLANES) {
          d += dot(q_sh[j], kv_unpack(k_word(pos, j, k_cache[kb + j])));
        }
      }
      red[t] = d;
      workgroupBarrier();
      for (var r = KLANES / 2u; r > 0u; r >>= 1u) {
        if (klane < r) {
          red[t] += red[t + r];
        }
        workgroupBarrier();
      }
      if (klane == 0u) {
        score[li] = select(NEG, red[t] * p.scale, pos < end);
      }
      workgroupBarrier();
    }
    var cm = m;
    for (var j = 0u; j < CHUNK; j++) {
      cm = max(cm, score[j]);
    }
    if (t < CHUNK) {
      weight[t] = select(0.0, exp(score[t] - cm), c + t < end);
    }
    workgroupBarrier();
    let corr = exp(m - cm);
    l *= corr;
    let cn = min(CHUNK, end - c);
    for (var j = 0u; j < cn; j++) {
      l += weight[j];
    }
    for (var sl = 0u; sl < VSLOTS; sl++) {
      let pjs = pj + sl * (WG / VSPLIT);
      if (pjs >= pairs) {
        break;
      }
      var a = acc[sl] * corr;
      let vb = head_word + pjs;
      var j = vpart;
      for (; j + 7u * VSPLIT < cn; j += 8u * VSPLIT) {  // 8 loads in flight, then the same sums in order
        var vw: array<KvWord, 8>;
        for (var u = 0u; u < 8u; u++) {
          let vpos = c + j + u * VSPLIT;
          vw[u] = v_word(vpos, pjs, v_cache[cache_row(vpos) * row_words + vb]);
        }
        for (var u = 0u; u < 8u; u++) {
          a += weight[j + u * VSPLIT] * kv_unpack(vw[u]);
        }
      }
      for (; j < cn; j += VSPLIT) {
        a += weight[j] * kv_unpack(v_word(c + j, pjs, v_cache[cache_row(c + j) * row_words + vb]));
      }
      acc[sl] = a;
    }
    m = cm;
    workgroupBarrier();
  }
  for (var sl = 0u; sl < VSLOTS; sl++) {
    let pjs = pj + sl * (WG / VSPLIT);
    acc_sh[t] = acc[sl];
    workgroupBarrier();
    if (t < WG / VSPLIT && pjs < pairs) {
      let a = acc_sh[t] + acc_sh[t + WG / VSPLIT];
      if (p.n_split == 1u) {
        part[h * pairs + pjs] = a / l;
      } else {
        part[acc_base + pjs] = a;
      }
    }
    workgroupBarrier();
  }
  if (t == 0u && p.n_split > 1u) {
    part[slot] = vec2<f32>(m, l);
  }
}
