// The sum of vec4 partials over the LANES lanes of a row group (LANES a power of two dividing the workgroup size
// WG; the includer declares both); every lane gets the group's totals. A workgroup-shared tree: correct for any
// subgroup width, or none. Kernels with fewer sums per lane pass them in the first components (the others add
// zeros, the used ones the same additions in the same association).
var<workgroup> red4: array<vec4<f32>, WG>;

fn group_sum(acc: vec4<f32>, tid: u32) -> vec4<f32> {
  let lane = tid % LANES;
  red4[tid] = acc;
  workgroupBarrier();
  // two levels per barrier: lane i < s/2 adds (i + s) and (i + s/2 + s) into i and i + s/2 first, the same
  // additions in the same association as one level at a time (the same bits); a lone last level after
  var s = LANES / 2u;
  for (; s > 1u; s >>= 2u) {
    let h = s / 2u;
    if (lane < h) {
      red4[tid] = (red4[tid] + red4[tid + s]) + (red4[tid + h] + red4[tid + h + s]);
    }
    workgroupBarrier();
  }
  if (s == 1u) {
    if (lane == 0u) {
      red4[tid] += red4[tid + 1u];
    }
    workgroupBarrier();
  }
  return red4[tid - lane];
}

