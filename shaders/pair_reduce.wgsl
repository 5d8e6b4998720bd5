// Sum of a pair of partials (gate, up) over the LANES lanes that share one row; every lane gets the row's totals.
// LANES is a power of two dividing the workgroup size of 64. A workgroup-shared tree like row_reduce.wgsl.
var<workgroup> pair_red: array<vec2<f32>, 64>;

fn pair_sum(acc: vec2<f32>, tid: u32) -> vec2<f32> {
  let lane = tid % LANES;
  pair_red[tid] = acc;
  workgroupBarrier();
  var s = LANES / 2u;
  for (; s > 1u; s >>= 2u) {   // two levels per barrier, the same association (row_reduce4.wgsl)
    let h = s / 2u;
    if (lane < h) {
      pair_red[tid] = (pair_red[tid] + pair_red[tid + s]) + (pair_red[tid + h] + pair_red[tid + h + s]);
    }
    workgroupBarrier();
  }
  if (s == 1u) {
    if (lane == 0u) {
      pair_red[tid] += pair_red[tid + 1u];
    }
    workgroupBarrier();
  }
  return pair_red[tid - lane];
}

#include "silu_times.wgsl"
