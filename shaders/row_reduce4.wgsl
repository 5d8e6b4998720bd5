// Row groups of LANES lanes computing ROWS rows each (matvec.wgsl's layout): a lane's partial products, and their
// sum over the group. LANES is a power of two dividing the workgroup size of 64. The includer declares LANES, ROWS
// and block_dot_q (block_dot_*.wgsl).
var<workgroup> red4: array<vec4<f32>, 64>;

// The sum of the lanes' vec4 partials over their row group; every lane gets the group's totals (a workgroup-shared
// tree: correct for any subgroup width, or none).
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

// This lane's partial sums for rows row0 .. row0 + ROWS - 1 of a matrix of `rows` rows of nb blocks whose row 0 is
// weight row `base` of the buffers (rows past the end repeat the last row: the caller never writes them).
fn rows_partial(row0: u32, lane: u32, base: u32, rows: u32, nb: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  if (row0 < rows) {
    for (var b = lane; b < nb; b += LANES) {
      for (var i = 0u; i < ROWS; i++) {
        acc[i] += block_dot_q((base + min(row0 + i, rows - 1u)) * nb + b, b);
      }
    }
  }
  return acc;
}
