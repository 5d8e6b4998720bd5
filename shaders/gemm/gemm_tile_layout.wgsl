// Where a lane's accumulators of the prefill GEMM tiles (gemm_tile_{f32,q8}.wgsl) land: the weight row of
// acc[2j + h][i] inside the tile, and its token (TN tokens per lane).
fn tile_row(lid: u32, h: u32, i: u32) -> u32 {
  return 64u * h + 4u * (lid % 16u) + i;
}

fn tile_token(lid: u32, j: u32) -> u32 {
  return TN * (lid / 16u) + j;
}
