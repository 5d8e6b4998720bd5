// Activation staging of the int8 GEMM tile (gemm_tile_q8.wgsl) from rows quantised ahead (gemm_xin_q8.wgsl): the
// codes and scale of one (token, block) copied, instead of 32 values quantised per (token, block) in every
// workgroup (gemm_x_f32.wgsl; the same codes). The includer defines x_block(t, b): the block's index r·nb + b, or -1
// outside the data.
struct StagedX { c0: vec4<u32>, c1: vec4<u32>, d: f32 }

fn x_stage_load(t: u32, b: u32, nb: u32) -> StagedX {
  var sx: StagedX;  // tokens and blocks outside the data stage zero codes
  let i = x_block(t, b);
  if (i >= 0 && b < nb) {
    sx.c0 = x[2u * u32(i)];
    sx.c1 = x[2u * u32(i) + 1u];
    let s = p.x_base + u32(i);
    sx.d = bitcast<f32>(x[s / 4u][s % 4u]);
  }
  return sx;
}

// Token tok's block xb of the step into the tile's xq / xd.
fn x_stage_store(tok: u32, xb: u32, sx: StagedX) {
  let w = array<u32, 8>(sx.c0.x, sx.c0.y, sx.c0.z, sx.c0.w, sx.c1.x, sx.c1.y, sx.c1.z, sx.c1.w);
  for (var i = 0u; i < 8u; i++) {
    xq[((xb * 8u + i) * TT + tok) / 4u][tok % 4u] = w[i];
  }
  xd[xb * TT + tok] = sx.d;
}
