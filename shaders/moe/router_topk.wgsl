// MoE routing for one token, on the GPU: probabilities = softmax(logits) over n_exp <= 256 experts; pick the k
// largest (ties to the lower expert index, like a stable descending sort); weights = the picked probabilities,
// divided by their sum when renorm != 0 (Qwen3 norm_topk_prob). One workgroup of 256 per token: workgroup r
// routes row r (logits[r·n_exp ..] -> route_ids / route_w[r·k ..]); a token's decode dispatches one.
struct Params { n_exp: u32, k: u32, renorm: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> route_ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> route_w: array<f32>;

var<workgroup> val: array<f32, 256>;
var<workgroup> idx: array<u32, 256>;
var<workgroup> picked: array<f32, 64>;
const SUM_LANES: u32 = 256u;
#include "workgroup_sum.wgsl"

// Tree reduction of (val, idx) to position 0: max by value, ties to the lower index.
fn reduce_max(t: u32) {
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (t < s) {
      let a = val[t];
      let b = val[t + s];
      if (b > a || (b == a && idx[t + s] < idx[t])) {
        val[t] = b;
        idx[t] = idx[t + s];
      }
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let lb = wg.x * p.n_exp;
  let ob = wg.x * p.k;
  var v = -3.0e38;
  if (t < p.n_exp) {
    v = logits[lb + t];
  }
  val[t] = v;
  idx[t] = t;
  workgroupBarrier();
  reduce_max(t);
  let mx = val[0];
  workgroupBarrier();
  var e = 0.0;
  if (t < p.n_exp) {
    e = exp(v - mx);
  }
  let total = workgroup_sum(e, t);
  // Unused lanes get -1 so they are never picked (probabilities are >= 0).
  var prob = -1.0;
  if (t < p.n_exp) {
    prob = e / total;
  }
  val[t] = prob;
  workgroupBarrier();
  // Every lane ranks its own expert at once (a stable descending sort: larger first, ties to the lower index)
  // instead of k rounds of a tree reduction with a barrier per level; the k best write themselves.
  var rank = 0u;
  for (var j = 0u; j < 256u; j++) {
    let o = val[j];
    if (o > prob || (o == prob && j < t)) {
      rank++;
    }
  }
  if (rank < p.k) {
    route_ids[ob + rank] = t;
    picked[rank] = prob;
  }
  workgroupBarrier();
  if (t == 0u) {
    var sum = 0.0;
    for (var i = 0u; i < p.k; i++) {
      sum += picked[i];
    }
    for (var i = 0u; i < p.k; i++) {
      if (p.renorm != 0u) {
        route_w[ob + i] = picked[i] / sum;
      } else {
        route_w[ob + i] = picked[i];
      }
    }
  }
}
