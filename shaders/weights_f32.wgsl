// F32 weights, row-major (a GGUF F32 matrix as stored); element e = row * K + col.
@group(0) @binding(3) var<storage, read> w_f32: array<vec4<f32>>;

fn w_at(e: u32) -> f32 {
  return w_f32[e >> 2u][e & 3u];
}

// weights_q8.wgsl's block held ahead: for F32 weights only its index (32 values are too many registers to hold a
// step's worth); block_dot_loaded then reads them as block_dot_q does.
struct WBlock { blk: u32 }

fn w_block(blk: u32) -> WBlock {
  return WBlock(blk);
}
