// The router's top-k computed by every workgroup of the routed gate/up product (one dispatch per MoE layer fewer
// than router_topk.wgsl then the product), with router_topk.wgsl's arithmetic step for step (the same max, the
// same tree for the softmax's sum, the same ranking by probability, ties to the lower expert index, the same
// renormalisation), so both give the same bits. Every workgroup ranks before it loads a weight, so the ranking's
// latency is the product's: 4 barriers, and the loops read workgroup memory as vec4s each lane loads whole (not
// trees of barriers, nor chains of one load per step: on the H200 the tree form cost ~40 µs per dispatch).
// route[0 .. n_exp) holds the router's logits; the writer workgroup also stores the ids at route[p.ids_base ..]
// and the weights (f32 bits) at route[p.w_base ..] for the down product and the block's sums. 64 lanes,
// n_exp <= 256: lane t holds experts 4t .. 4t + 3.
@group(0) @binding(5) var<storage, read_write> route: array<u32>;

var<workgroup> lane_sh: array<vec4<f32>, 16>;   // one value per lane: lane t at [t / 4][t % 4]
var<workgroup> e_sh: array<vec4<f32>, 64>;      // exp(logit - max) per expert, lane t's four at [t]
var<workgroup> prob_sh: array<vec4<f32>, 64>;   // the probabilities, as e_sh
var<workgroup> ranked: array<u32, 64>;          // expert by rank (k <= 64)
var<workgroup> picked: array<f32, 64>;          // its probability

fn routed_expert(kk: u32, t: u32, writer: bool) -> u32 {
  let idx = vec4<u32>(4u * t) + vec4<u32>(0u, 1u, 2u, 3u);
  let live = idx < vec4<u32>(p.n_exp);
  var v = vec4<f32>(-3.0e38);
  for (var c = 0u; c < 4u; c++) {
    if (live[c]) {
      v[c] = bitcast<f32>(route[idx[c]]);
    }
  }
  lane_sh[t >> 2u][t & 3u] = max(max(v.x, v.y), max(v.z, v.w));
  workgroupBarrier();
  var m4 = lane_sh[0];
  for (var j = 1u; j < 16u; j++) {
    m4 = max(m4, lane_sh[j]);   // a max is exact in any order: router_topk's tree gives the same value
  }
  let e = select(vec4<f32>(0.0), exp(v - vec4<f32>(max(max(m4.x, m4.y), max(m4.z, m4.w)))), live);
  e_sh[t] = e;
  workgroupBarrier();
  // router_topk's tree over 256 slots (level s adds slot i + s into slot i), every lane the whole tree in
  // registers: the first two levels give slot i (e_i + e_{i+128}) + (e_{i+64} + e_{i+192}), as vec4s of slots.
  var b: array<vec4<f32>, 16>;
  for (var j = 0u; j < 16u; j++) {
    b[j] = (e_sh[j] + e_sh[j + 32u]) + (e_sh[j + 16u] + e_sh[j + 48u]);
  }
  for (var s = 8u; s > 0u; s >>= 1u) {
    for (var j = 0u; j < s; j++) {
      b[j] += b[j + s];
    }
  }
  let total = (b[0].x + b[0].z) + (b[0].y + b[0].w);
  let prob = select(vec4<f32>(-1.0), e / vec4<f32>(total), live);   // unused slots: never picked
  prob_sh[t] = prob;
  lane_sh[t >> 2u][t & 3u] = max(max(prob.x, prob.y), max(prob.z, prob.w));   // lane_sh's maxima were read above
  workgroupBarrier();
  // Only a value that fewer than k lanes' maxima exceed can be among the k (the k-th largest maximum and those above
  // it are k values at least as large): the candidates, a few lanes' values.
  var above = vec4<u32>(0u);
  for (var j = 0u; j < 16u; j++) {
    let o = lane_sh[j];
    for (var c = 0u; c < 4u; c++) {
      above += select(vec4<u32>(0u), vec4<u32>(1u), vec4<f32>(o[c]) > prob);
    }
  }
  let cand = live & (above < vec4<u32>(p.k));
  if (any(cand)) {
    // a candidate's rank: the values before it, all of them candidates too (ties to the lower expert index)
    var rank = vec4<u32>(0u);
    for (var j = 0u; j < 64u; j++) {
      let o = prob_sh[j];
      for (var c = 0u; c < 4u; c++) {
        let o_c = vec4<f32>(o[c]);
        let first = (o_c > prob) | ((o_c == prob) & (vec4<u32>(4u * j + c) < idx));
        rank += select(vec4<u32>(0u), vec4<u32>(1u), first);
      }
    }
    for (var c = 0u; c < 4u; c++) {
      if (cand[c] && rank[c] < p.k) {
        ranked[rank[c]] = idx[c];
        picked[rank[c]] = prob[c];
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
