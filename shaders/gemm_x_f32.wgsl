// Activation staging of the int8 GEMM tile (gemm_tile_q8.wgsl) from raw f32 rows: one (token, block) of 32 values,
// loaded a step ahead and quantised as it is stored, as llama.cpp's quantize_row_q8_0 does (d = f16(amax / 127),
// q = round-half-even(x · 127 / amax): q8_block.wgsl's codes, packed here straight into the tile's workgroup
// memory). The includer declares x (f32) and x_index(t, col) (-1 for a token outside the data).
#include "round_f16.wgsl"

struct StagedX { v: array<f32, 32> }

fn x_stage_load(t: u32, b: u32, nb: u32) -> StagedX {
  var sx: StagedX;  // tokens and blocks outside the data stage zeros
  let e = x_index(t, 32u * b);
  if (e >= 0 && b < nb) {
    for (var i = 0u; i < 32u; i++) {
      sx.v[i] = x[u32(e) + i];
    }
  }
  return sx;
}

// Token tok's block xb of the step into the tile's xq / xd.
fn x_stage_store(tok: u32, xb: u32, sx: StagedX) {
  var amax = 0.0;
  for (var i = 0u; i < 32u; i++) {
    amax = max(amax, abs(sx.v[i]));
  }
  var inv = 0.0;
  if (amax > 0.0) {
    inv = 127.0 / amax;
  }
  for (var i = 0u; i < 8u; i++) {
    let v = vec4<f32>(sx.v[4u * i], sx.v[4u * i + 1u], sx.v[4u * i + 2u], sx.v[4u * i + 3u]);
    xq[((xb * 8u + i) * TT + tok) / 4u][tok % 4u] = pack4xI8(vec4<i32>(round(v * inv)));
  }
  xd[xb * TT + tok] = round_to_f16(amax / 127.0);
}
