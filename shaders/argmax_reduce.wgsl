// Workgroup tree reduction of 256 (value, index) candidates to val[0] / idx[0]: the larger value, ties to the lower
// index; index NONE marks an empty candidate. Needs `val`, `idx` (array<_, 256> in workgroup memory) and NONE.
fn reduce_argmax(t: u32, v: f32, i: u32) {
  val[t] = v;
  idx[t] = i;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (t < s) {
      let b = val[t + s];
      let a = val[t];
      let ib = idx[t + s];
      let ia = idx[t];
      if (ib != NONE && (ia == NONE || b > a || (b == a && ib < ia))) {
        val[t] = b;
        idx[t] = ib;
      }
    }
    workgroupBarrier();
  }
}
