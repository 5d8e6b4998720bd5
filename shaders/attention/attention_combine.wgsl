// Decode attention, pass 2 of 2: merge the S partials (m_s, l_s, acc_s) that attention.wgsl wrote for each q
// head into out[h·hd ..] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s with M = max_s m_s (the usual max
// rescaling, so no exponent overflows whatever the scores). Splits without positions have m = -3e38, l = 0,
// acc = 0 and drop out (split 0 always holds position 0). Workgroups (q head, value pairs / 128), one lane per pair;
// S is small (<= 32), so every lane reads the (m, l) list itself: it is the same few words for all lanes.
struct Params { n_head: u32, n_split: u32, pairs: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec2<f32>>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let h = wg.x;
  let j = wg.y * 128u + lid.x;
  if (j >= p.pairs) {
    return;
  }
  let first = h * p.n_split;
  // 8 partials' loads in flight, then their terms in order (a loop that uses each load before it issues the next
  // waits for every one in turn)
  var mx = -3.0e38;
  var s = 0u;
  for (; s + 8u <= p.n_split; s += 8u) {
    var m8: array<f32, 8>;
    for (var u = 0u; u < 8u; u++) {
      m8[u] = part[first + s + u].x;
    }
    for (var u = 0u; u < 8u; u++) {
      mx = max(mx, m8[u]);
    }
  }
  for (; s < p.n_split; s++) {
    mx = max(mx, part[first + s].x);
  }
  var l = 0.0;
  var acc = vec2<f32>(0.0, 0.0);
  let acc0 = p.n_head * p.n_split + first * p.pairs + j;
  s = 0u;
  for (; s + 8u <= p.n_split; s += 8u) {
    var ml: array<vec2<f32>, 8>;
    var a8: array<vec2<f32>, 8>;
    for (var u = 0u; u < 8u; u++) {
      ml[u] = part[first + s + u];
      a8[u] = part[acc0 + (s + u) * p.pairs];
    }
    for (var u = 0u; u < 8u; u++) {
      let w = exp(ml[u].x - mx);
      l += w * ml[u].y;
      acc += w * a8[u];
    }
  }
  for (; s < p.n_split; s++) {
    let ml = part[first + s];
    let w = exp(ml.x - mx);
    l += w * ml.y;
    acc += w * part[acc0 + s * p.pairs];
  }
  out[h * p.pairs + j] = acc / l;
}
