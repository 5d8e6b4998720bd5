// Sum of the lanes' vec4 partials (up to 4 rows each) over the LANES lanes of a row group; every lane gets the
// group's totals. LANES is a power of two dividing the workgroup size of 64. A workgroup-shared tree (correct for
// any subgroup width, or none).
var<workgroup> red4: array<vec4<f32>, 64>;

fn group_sum(acc: vec4<f32>, tid: u32) -> vec4<f32> {
  let lane = tid % LANES;
  red4[tid] = acc;
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      red4[tid] += red4[tid + s];
    }
    workgroupBarrier();
  }
  return red4[tid - lane];
}
