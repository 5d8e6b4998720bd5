// Workgroup tree reduction of WG (value, index) candidates to val[0] / idx[0]: the larger value, ties to the lower
// index; index NONE marks an empty candidate. Needs `val`, `idx` (array<_, WG> in workgroup memory), NONE and WG (a
// power of 4: two levels per barrier).

// Whether candidate (b, ib) beats (a, ia).
fn argmax_beats(a: f32, ia: u32, b: f32, ib: u32) -> bool {
  return ib != NONE && (ia == NONE || b > a || (b == a && ib < ia));
}

fn reduce_argmax(t: u32, v: f32, i: u32) {
  val[t] = v;
  idx[t] = i;
  workgroupBarrier();
  // two levels per barrier: lane t < s/2 keeps the best of t, t + s/2, t + s, t + 3s/2 (a total order: the
  // winner does not depend on the tree's shape); WG = 256 takes s = 128, 32, 8, 2, and 1024 s = 512, ..., 2
  for (var s = WG / 2u; s > 1u; s >>= 2u) {
    let h = s / 2u;
    if (t < h) {
      var a = val[t];
      var ia = idx[t];
      for (var j = 1u; j < 4u; j++) {
        let o = t + select(0u, h, (j & 1u) != 0u) + select(0u, s, j >= 2u);
        let b = val[o];
        let ib = idx[o];
        if (argmax_beats(a, ia, b, ib)) {
          a = b;
          ia = ib;
        }
      }
      val[t] = a;
      idx[t] = ia;
    }
    workgroupBarrier();
  }
}
