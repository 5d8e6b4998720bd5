// The sum of one value per lane over a workgroup of 64, returned to every lane: a tree in workgroup memory (correct
// for any subgroup width, or none). Every lane of the workgroup must call it (it has barriers); the last barrier
// lets a following call reuse the array once every lane has read the total.
var<workgroup> sum64_red: array<f32, 64>;

fn workgroup_sum64(v: f32, t: u32) -> f32 {
  sum64_red[t] = v;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) {
      sum64_red[t] += sum64_red[t + s];
    }
    workgroupBarrier();
  }
  let total = sum64_red[0];
  workgroupBarrier();
  return total;
}
