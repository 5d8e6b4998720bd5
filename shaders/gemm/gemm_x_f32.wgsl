// Activation staging of the int8 GEMM tile (gemm_tile_q8.wgsl) from raw f32 rows: one (token, block) of 32 values,
// loaded a step ahead and quantised as it is stored, as llama.cpp's quantize_row_q8_0 does (d = f16(amax / 127),
// q = round-half-even(x · 127 / amax): q8_block.wgsl's codes, packed here straight into the tile's workgroup
// memory). The includer declares x (f32) and x_index(t, col) (-1 for a token outside the data).
#include "q8_block.wgsl"

struct StagedX { v: array<vec4<f32>, 8> }

fn x_stage_load(t: u32, b: u32, nb: u32) -> StagedX {
  var sx: StagedX;  // tokens and blocks outside the data stage zeros
  let e = x_index(t, 32u * b);
  if (e >= 0 && b < nb) {
    let e0 = u32(e);
    for (var i = 0u; i < 8u; i++) {
      sx.v[i] = vec4<f32>(x[e0 + 4u * i], x[e0 + 4u * i + 1u], x[e0 + 4u * i + 2u], x[e0 + 4u * i + 3u]);
    }
  }
  return sx;
}

// Token tok's block xb of the step into the tile's xq / xd (q8_block's codes, laid out as the tile reads them).
fn x_stage_store(tok: u32, xb: u32, sx: StagedX) {
  let q = q8_block(sx.v);
  for (var i = 0u; i < 8u; i++) {
    xq[((xb * 8u + i) * TT + tok) / 4u][tok % 4u] = q.codes[i];
  }
  xd[xb * TT + tok] = q.d;
}
