// The router's top-k computed by every workgroup of the routed gate/up product (one dispatch per MoE layer fewer
// than router_topk.wgsl then the product). The workgroups rank the router's logits, not its probabilities: the
// softmax is monotonic, so the same experts come in the same order (ties to the lower expert index), save for
// distinct logits whose probabilities round to one f32 value. Only the writer (one more workgroup of the dispatch,
// which computes no product) also takes the softmax, with router_topk.wgsl's arithmetic step for step (the same max,
// the same tree for its sum, the same renormalisation), and stores the ids and weights: the products' workgroups no
// longer wait on the softmax's trees before they load a weight.
// A lane's loop of dependent workgroup-memory loads costs far more than a barrier on the H200
// (lab/gpu_probes/route_variants.mjs), so the loops read vec4s and rank all four of a lane's values per load, and the
// trees take two levels per barrier.
// route[0 .. n_exp) holds the router's logits; the writer stores the ids at route[p.ids_base ..] and the weights (f32
// bits) at route[p.w_base ..] for the down product and the block's sums. 64 lanes, n_exp <= 256: lane t holds
// experts 4t .. 4t + 3 (router_topk's lanes 4t .. 4t + 3).
@group(0) @binding(5) var<storage, read_write> route: array<u32>;

const ROUTE_WRITER: bool = true;   // the dispatch's last row of workgroups: its first is the writer

var<workgroup> max_sh: array<f32, 64>;
var<workgroup> sum_sh: array<f32, 256>;
var<workgroup> lane_max_sh: array<vec4<f32>, 16>;   // lane t's largest logit at [t / 4][t % 4]
var<workgroup> cand: array<vec2<u32>, 256>;         // candidates: logit (f32 bits), expert
var<workgroup> n_cand: atomic<u32>;
var<workgroup> threshold: f32;
var<workgroup> ranked: array<u32, 64>;    // expert by rank (k <= 64)
var<workgroup> picked: array<f32, 64>;    // its probability (the writer)
var<private> lane_logits: vec4<f32>;      // lane t's experts' logits (-3e38 past n_exp)
var<private> lane_rank: vec4<u32>;        // and their ranks (p.k or more: not picked)

// Ranks the router's logits into `ranked` (every lane must call it: barriers).
fn rank_experts(t: u32) {
  let idx = vec4<u32>(4u * t) + vec4<u32>(0u, 1u, 2u, 3u);
  let live = idx < vec4<u32>(p.n_exp);
  var v = vec4<f32>(-3.0e38);
  for (var c = 0u; c < 4u; c++) {
    if (live[c]) {
      v[c] = bitcast<f32>(route[idx[c]]);
    }
  }
  lane_logits = v;
  // Only experts at or above the k-th largest of the 64 lanes' maxima can be among the k (at least k values
  // reach it: those lanes' maxima), so only those candidates are ranked, against each other.
  let lane_max = max(max(v.x, v.y), max(v.z, v.w));
  lane_max_sh[t >> 2u][t & 3u] = lane_max;
  if (t == 0u) {
    atomicStore(&n_cand, 0u);
  }
  workgroupBarrier();
  var above = 0u;   // lanes whose maximum comes before this lane's (ties to the lower lane)
  for (var j = 0u; j < 16u; j++) {
    let o = lane_max_sh[j];
    let lanes = vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u);
    let before = (o > vec4<f32>(lane_max)) | ((o == vec4<f32>(lane_max)) & (lanes < vec4<u32>(t)));
    above += dot(select(vec4<u32>(0u), vec4<u32>(1u), before), vec4<u32>(1u));
  }
  if (above == p.k - 1u) {
    threshold = lane_max;
  }
  workgroupBarrier();
  let floor_v = threshold;
  let mine = live & (v >= vec4<f32>(floor_v));
  for (var c = 0u; c < 4u; c++) {
    if (mine[c]) {
      cand[atomicAdd(&n_cand, 1u)] = vec2<u32>(bitcast<u32>(v[c]), idx[c]);
    }
  }
  workgroupBarrier();
  let n = atomicLoad(&n_cand);
  var rank = vec4<u32>(p.k);
  if (any(mine)) {
    // the lane's candidates' ranks, all four per candidate read (ties to the lower expert index)
    rank = vec4<u32>(0u);
    for (var j = 0u; j < n; j++) {
      let o = cand[j];
      let o_v = vec4<f32>(bitcast<f32>(o.x));
      rank += select(vec4<u32>(0u), vec4<u32>(1u), (o_v > v) | ((o_v == v) & (vec4<u32>(o.y) < idx)));
    }
    rank = select(vec4<u32>(p.k), rank, mine);
    for (var c = 0u; c < 4u; c++) {
      if (rank[c] < p.k) {
        ranked[rank[c]] = idx[c];
      }
    }
  }
  lane_rank = rank;
  workgroupBarrier();
}

// The expert of rank kk (every lane must call it).
fn routed_expert(kk: u32, t: u32) -> u32 {
  rank_experts(t);
  return ranked[kk];
}

// The writer: the same ranking, then the softmax over all experts (router_topk.wgsl's max, tree and division), and the
// ids and renormalised weights of the k picked, in rank order.
fn write_route(t: u32) {
  rank_experts(t);
  let idx = vec4<u32>(4u * t) + vec4<u32>(0u, 1u, 2u, 3u);
  let live = idx < vec4<u32>(p.n_exp);
  let v = lane_logits;
  max_sh[t] = max(max(v.x, v.y), max(v.z, v.w));
  workgroupBarrier();
  for (var s = 16u; s > 0u; s >>= 2u) {   // two levels of the tree per barrier (a max is exact in any order)
    if (t < s) {
      max_sh[t] = max(max(max_sh[t], max_sh[t + 2u * s]), max(max_sh[t + s], max_sh[t + 3u * s]));
    }
    workgroupBarrier();
  }
  let e = select(vec4<f32>(0.0), exp(v - vec4<f32>(max_sh[0])), live);
  for (var c = 0u; c < 4u; c++) {
    sum_sh[idx[c]] = e[c];
  }
  workgroupBarrier();
  // router_topk's tree over 256 slots (level s adds slot i + s into slot i), two levels per barrier: slot i < s
  // gets (x_i + x_{i+2s}) + (x_{i+s} + x_{i+3s}), the same additions in the same association; each lane reads
  // only the slots it writes.
  for (var s = 64u; s > 0u; s >>= 2u) {
    if (t < s) {
      sum_sh[t] = (sum_sh[t] + sum_sh[t + 2u * s]) + (sum_sh[t + s] + sum_sh[t + 3u * s]);
    }
    workgroupBarrier();
  }
  let prob = e / vec4<f32>(sum_sh[0]);
  for (var c = 0u; c < 4u; c++) {
    if (lane_rank[c] < p.k) {
      picked[lane_rank[c]] = prob[c];
    }
  }
  workgroupBarrier();
  if (t < p.k) {
    var sum = 0.0;
    for (var i = 0u; i < p.k; i++) {
      sum += picked[i];
    }
    route[p.ids_base + t] = ranked[t];
    route[p.w_base + t] = bitcast<u32>(picked[t] / sum);
  }
}
