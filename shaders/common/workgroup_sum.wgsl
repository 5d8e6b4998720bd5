// The sum of one value per lane over a workgroup of SUM_LANES lanes (a power of two; the includer declares
// `const SUM_LANES: u32`), returned to every lane: a tree in workgroup memory (correct for any subgroup width, or
// none). Every lane of the workgroup must call it (it has barriers); the last barrier lets a following call reuse
// the array once every lane has read the total.
var<workgroup> sum_red: array<f32, SUM_LANES>;

fn workgroup_sum(v: f32, t: u32) -> f32 {
  sum_red[t] = v;
  workgroupBarrier();
  var s = SUM_LANES / 2u;
  for (; s > 1u; s >>= 2u) {   // two levels per barrier, the same association (row_reduce4.wgsl)
    let h = s / 2u;
    if (t < h) {
      sum_red[t] = (sum_red[t] + sum_red[t + s]) + (sum_red[t + h] + sum_red[t + h + s]);
    }
    workgroupBarrier();
  }
  if (s == 1u) {
    if (t == 0u) {
      sum_red[0] += sum_red[1];
    }
    workgroupBarrier();
  }
  let total = sum_red[0];
  workgroupBarrier();
  return total;
}
