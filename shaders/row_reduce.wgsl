// Sum of `acc` over the LANES lanes that share one row; every lane gets the row's total. LANES is a power of two
// dividing the workgroup size of 64. A workgroup-shared tree (correct for any subgroup width, or none).
var<workgroup> row_red: array<f32, 64>;

fn row_sum(acc: f32, tid: u32) -> f32 {
  let lane = tid % LANES;
  row_red[tid] = acc;
  workgroupBarrier();
  var s = LANES / 2u;
  for (; s > 1u; s >>= 2u) {   // two levels per barrier, the same association (row_reduce4.wgsl)
    let h = s / 2u;
    if (lane < h) {
      row_red[tid] = (row_red[tid] + row_red[tid + s]) + (row_red[tid + h] + row_red[tid + h + s]);
    }
    workgroupBarrier();
  }
  if (s == 1u) {
    if (lane == 0u) {
      row_red[tid] += row_red[tid + 1u];
    }
    workgroupBarrier();
  }
  return row_red[tid - lane];
}
