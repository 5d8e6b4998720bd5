// Row groups of LANES lanes computing ROWS rows each (matvec.wgsl's layout): a lane's partial products, and their
// sum over the group. LANES is a power of two dividing the workgroup size WG. The includer declares LANES, ROWS,
// WG and block_dot_q (block_dot_*.wgsl).
#include "group_sum4.wgsl"

// This lane's partial sums for rows row0 .. row0 + ROWS - 1 of a matrix of `rows` rows of nb blocks whose row 0 is
// weight row `base` of the buffers (rows past the end repeat the last row: the caller never writes them).
// With one row per lane group, four of the lane's blocks per step (the same additions in the same order as one at a
// time): their loads are independent, so they are in flight together rather than one memory round trip per block.
// With ROWS rows the rows' blocks are already that many loads in flight: one block per step (in the engine's profile
// on the H200 the DeltaNet input product took 138 -> 132 µs per token so:
// docs/results/2026-12-04-h200-decode-kernels.json).
const BLOCKS_PER_STEP: u32 = select(1u, 4u, ROWS == 1u);

fn rows_partial(row0: u32, lane: u32, base: u32, rows: u32, nb: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  if (row0 < rows) {
    var b = lane;
    for (; BLOCKS_PER_STEP == 4u && b + 3u * LANES < nb; b += 4u * LANES) {
      for (var i = 0u; i < ROWS; i++) {
        let blk = (base + min(row0 + i, rows - 1u)) * nb + b;
        let d0 = block_dot_q(blk, b);
        let d1 = block_dot_q(blk + LANES, b + LANES);
        let d2 = block_dot_q(blk + 2u * LANES, b + 2u * LANES);
        let d3 = block_dot_q(blk + 3u * LANES, b + 3u * LANES);
        acc[i] += d0;
        acc[i] += d1;
        acc[i] += d2;
        acc[i] += d3;
      }
    }
    for (; b < nb; b += LANES) {
      for (var i = 0u; i < ROWS; i++) {
        acc[i] += block_dot_q((base + min(row0 + i, rows - 1u)) * nb + b, b);
      }
    }
  }
  return acc;
}
