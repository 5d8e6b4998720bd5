// Activation staging of the int8 GEMM tile (gemm_tile_q8.wgsl) from raw f32 rows: one (token, block) of 32 values,
// loaded a step ahead and quantised when stored (q8_block.wgsl: llama.cpp's quantize_row_q8_0). The includer
// declares x (f32) and x_index(t, col) (-1 for a token outside the data).
#include "q8_block.wgsl"

struct StagedX { v: array<vec4<f32>, 8> }

fn x_stage_load(t: u32, b: u32, nb: u32) -> StagedX {
  var sx: StagedX;  // tokens and blocks outside the data stage zeros
  let e = x_index(t, 32u * b);
  if (e >= 0 && b < nb) {
    let o = u32(e);
    for (var i = 0u; i < 8u; i++) {
      sx.v[i] = vec4<f32>(x[o + 4u * i], x[o + 4u * i + 1u], x[o + 4u * i + 2u], x[o + 4u * i + 3u]);
    }
  }
  return sx;
}

fn x_stage_codes(sx: StagedX) -> Q8Block {
  return q8_block(sx.v);
}
