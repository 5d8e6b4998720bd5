// Sum of `acc` over the LANES lanes that share one row; every lane gets the row's total. LANES is a power of two
// dividing the workgroup size of 64. A workgroup-shared tree (correct for any subgroup width, or none).
var<workgroup> row_red: array<f32, 64>;

fn row_sum(acc: f32, tid: u32) -> f32 {
  let lane = tid % LANES;
  row_red[tid] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      row_red[tid] += row_red[tid + s];
    }
    workgroupBarrier();
  }
  return row_red[tid - lane];
}
