// gemm.wgsl's activation rows quantised ahead by the norm that wrote them (rmsnorm_q8.wgsl over the chunk's rows:
// block b of row r has its codes at vec4 2·(r·nb + b) and its scale at u32 x_base + r·nb + b), for the int8 tile
// (gemm_tile_q8.wgsl): the staging copies codes and scale instead of quantising 32 values per (token, block) in
// every workgroup. The includer defines x_block(t, b): the block's index r·nb + b, or -1 outside the data.
@group(0) @binding(2) var<storage, read> x: array<vec4<u32>>;
#include "q8_block.wgsl"

struct StagedX { q: Q8Block }

fn x_stage_load(t: u32, b: u32, nb: u32) -> StagedX {
  var sx: StagedX;  // tokens and blocks outside the data stage zero codes
  let i = x_block(t, b);
  if (i >= 0 && b < nb) {
    let c0 = x[2u * u32(i)];
    let c1 = x[2u * u32(i) + 1u];
    let s = p.x_base + u32(i);
    sx.q.codes = array<u32, 8>(c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w);
    sx.q.d = bitcast<f32>(x[s / 4u][s % 4u]);
  }
  return sx;
}

fn x_stage_codes(sx: StagedX) -> Q8Block {
  return sx.q;
}
