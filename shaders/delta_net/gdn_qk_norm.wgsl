// The chunk's q/k scales pass (gdn_qk_scales.wgsl): the load of one row's q and k of key head kh into workgroup
// memory with their L2 scales (ggml_l2_norm: x / max(||x||, eps); q also times 1/sqrt(dk)). The includer declares
// p (dk, eps), WG, q_sh, k_sh, red_q, red_k and qkv_at(e): the value e of its q | k | v. Every lane of the
// workgroup must call it.

// (q_scale, k_scale) of the q and k rows at qkv_at(q_at ..) and qkv_at(k_at ..) (dk values each), staged in q_sh /
// k_sh.
fn load_qk(t: u32, q_at: u32, k_at: u32) -> vec2<f32> {
  var sq = 0.0;
  var sk = 0.0;
  for (var i = t; i < p.dk; i += WG) {
    let qv = qkv_at(q_at + i);
    let kv = qkv_at(k_at + i);
    q_sh[i] = qv;
    k_sh[i] = kv;
    sq += qv * qv;
    sk += kv * kv;
  }
  red_q[t] = sq;
  red_k[t] = sk;
  workgroupBarrier();
  var s = WG / 2u;
  for (; s > 1u; s >>= 2u) {   // two levels per barrier, the same association (row_reduce4.wgsl)
    let h = s / 2u;
    if (t < h) {
      red_q[t] = (red_q[t] + red_q[t + s]) + (red_q[t + h] + red_q[t + h + s]);
      red_k[t] = (red_k[t] + red_k[t + s]) + (red_k[t + h] + red_k[t + h + s]);
    }
    workgroupBarrier();
  }
  if (s == 1u) {
    if (t == 0u) {
      red_q[0] += red_q[1];
      red_k[0] += red_k[1];
    }
    workgroupBarrier();
  }
  return vec2<f32>(1.0 / (max(sqrt(red_q[0]), p.eps) * sqrt(f32(p.dk))), 1.0 / max(sqrt(red_k[0]), p.eps));
}
