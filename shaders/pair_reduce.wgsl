// Sum of a pair of partials (gate, up) over the LANES lanes that share one row; every lane gets the row's totals.
// LANES is a power of two dividing the workgroup size of 64. A workgroup-shared tree like row_reduce.wgsl.
var<workgroup> pair_red: array<vec2<f32>, 64>;

fn pair_sum(acc: vec2<f32>, tid: u32) -> vec2<f32> {
  let lane = tid % LANES;
  pair_red[tid] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      pair_red[tid] += pair_red[tid + s];
    }
    workgroupBarrier();
  }
  return pair_red[tid - lane];
}

#include "silu_times.wgsl"
