// The router's top-k computed by every workgroup of the routed gate/up product (one dispatch per MoE layer fewer
// than router_topk.wgsl then the product), with router_topk.wgsl's arithmetic step for step (the same max, the
// same tree for the softmax's sum, the same ranking by probability, ties to the lower expert index, the same
// renormalisation), so both give the same bits. route[0 .. n_exp) holds the router's logits; the writer workgroup
// also stores the ids at route[p.ids_base ..] and the weights (f32 bits) at route[p.w_base ..] for the down
// product and the block's sums. 64 lanes, n_exp <= 256: lane t holds experts 4t .. 4t + 3 (router_topk's lanes
// 4t .. 4t + 3).
@group(0) @binding(5) var<storage, read_write> route: array<u32>;

var<workgroup> max_sh: array<f32, 64>;
var<workgroup> sum_sh: array<f32, 256>;
var<workgroup> prob_sh: array<vec4<f32>, 64>;
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
  prob_sh[t] = prob;
  workgroupBarrier();
  let kv = vec4<u32>(p.k);
  var rank = vec4<u32>(0u);
  // unused slots (-1) never outrank a live expert, and an unused lane's own ranks are never < k: live slots only
  for (var j = 0u; j < (p.n_exp + 3u) / 4u; j++) {
    if (all(rank >= kv)) {
      break;   // none of this lane's experts can be picked any more
    }
    let o = prob_sh[j];
    for (var c = 0u; c < 4u; c++) {
      let ov = vec4<f32>(o[c]);
      let beats = (ov > prob) | ((ov == prob) & (vec4<u32>(4u * j + c) < idx));
      rank += select(vec4<u32>(0u), vec4<u32>(1u), beats);
    }
  }
  for (var c = 0u; c < 4u; c++) {
    if (rank[c] < p.k) {
      ranked[rank[c]] = idx[c];
      picked[rank[c]] = prob[c];
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
