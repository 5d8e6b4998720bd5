// The router's top-k computed by every workgroup of the routed gate/up product (one dispatch per MoE layer fewer
// than router_topk.wgsl then the product), with router_topk.wgsl's arithmetic step for step (the same max, the
// same tree for the softmax's sum, the same ranking by probability, ties to the lower expert index, the same
// renormalisation), so both give the same bits; only the ranking is organised differently (candidates first).
// route[0 .. n_exp) holds the router's logits; the writer workgroup also stores the ids at route[p.ids_base ..]
// and the weights (f32 bits) at route[p.w_base ..] for the down product and the block's sums. 64 lanes,
// n_exp <= 256: lane t holds experts 4t .. 4t + 3 (router_topk's lanes 4t .. 4t + 3).
@group(0) @binding(5) var<storage, read_write> route: array<u32>;

var<workgroup> max_sh: array<f32, 64>;
var<workgroup> sum_sh: array<f32, 256>;
var<workgroup> cand_p: array<f32, 256>;   // candidates: probability, expert
var<workgroup> cand_i: array<u32, 256>;
var<workgroup> n_cand: atomic<u32>;
var<workgroup> threshold: f32;
var<workgroup> ranked: array<u32, 64>;    // expert by rank (k <= 64)
var<workgroup> picked: array<f32, 64>;    // its probability

fn routed_expert(kk: u32, t: u32, writer: bool) -> u32 {
  let idx = vec4<u32>(4u * t) + vec4<u32>(0u, 1u, 2u, 3u);
  let live = idx < vec4<u32>(p.n_exp);
  var v = vec4<f32>(-3.0e38);
  for (var c = 0u; c < 4u; c++) {
    if (live[c]) {
      v[c] = bitcast<f32>(route[idx[c]]);
    }
  }
  max_sh[t] = max(max(v.x, v.y), max(v.z, v.w));
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) {
      max_sh[t] = max(max_sh[t], max_sh[t + s]);
    }
    workgroupBarrier();
  }
  let e = select(vec4<f32>(0.0), exp(v - vec4<f32>(max_sh[0])), live);
  for (var c = 0u; c < 4u; c++) {
    sum_sh[idx[c]] = e[c];
  }
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {   // router_topk's tree over 256 slots, 64 lanes doing its 256
    for (var i = t; i < s; i += 64u) {
      sum_sh[i] += sum_sh[i + s];
    }
    workgroupBarrier();
  }
  let prob = select(vec4<f32>(-1.0), e / vec4<f32>(sum_sh[0]), live);   // unused slots: never picked
  // Only experts at or above the k-th largest of the 64 lanes' maxima can be among the k (at least k values
  // reach it: those lanes' maxima), so only those candidates are ranked, against each other.
  let lane_max = max(max(prob.x, prob.y), max(prob.z, prob.w));
  max_sh[t] = lane_max;
  if (t == 0u) {
    atomicStore(&n_cand, 0u);
  }
  workgroupBarrier();
  var above = 0u;
  for (var j = 0u; j < 64u; j++) {
    let o = max_sh[j];
    above += select(0u, 1u, o > lane_max || (o == lane_max && j < t));
  }
  if (above == p.k - 1u) {
    threshold = lane_max;
  }
  workgroupBarrier();
  let floor_p = threshold;
  for (var c = 0u; c < 4u; c++) {
    if (live[c] && prob[c] >= floor_p) {
      let at = atomicAdd(&n_cand, 1u);
      cand_p[at] = prob[c];
      cand_i[at] = idx[c];
    }
  }
  workgroupBarrier();
  let n = atomicLoad(&n_cand);
  for (var c = 0u; c < 4u; c++) {
    if (live[c] && prob[c] >= floor_p) {
      var rank = 0u;
      for (var j = 0u; j < n; j++) {
        let o = cand_p[j];
        rank += select(0u, 1u, o > prob[c] || (o == prob[c] && cand_i[j] < idx[c]));
      }
      if (rank < p.k) {
        ranked[rank] = idx[c];
        picked[rank] = prob[c];
      }
    }
  }
  workgroupBarrier();
  if (writer && t < p.k) {
    var sum = 0.0;
    for (var i = 0u; i < p.k; i++) {
      sum += picked[i];
    }
    route[p.ids_base + t] = ranked[t];
    route[p.w_base + t] = bitcast<u32>(picked[t] / sum);
  }
  return ranked[kk];
}
