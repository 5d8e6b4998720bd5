// The shared tile loop of the prefill GEMMs: 64 weight rows × 32 activation rows per workgroup of 256, K in steps
// of one 32-column block. Per step the workgroup stages the dequantised weights (4 lanes per row, 8 values each)
// and the activations (8 lanes per row, 4 values each) in workgroup memory; each lane then accumulates 4 weight
// rows × 2 activation rows (f32). The includer defines x_index(row, col) (-1 for a row outside the tile's data)
// and w_block(row, b) -> vec2<u32> (codes vec4 index, scale index) for the weight block, or an absent row.
const TR: u32 = 64u;
const TT: u32 = 32u;
const PAD: u32 = 33u;  // row pitch of the tiles: neighbouring lanes hit different banks
var<workgroup> wt: array<f32, 2112>;  // TR × PAD
var<workgroup> xt: array<f32, 1056>;  // TT × PAD

// acc[a * 2 + c] = Σ_col W[r0 + lane%16 + 16a][col] · X[row lane/16 + 16c][col]
fn tile_product(lid: u32, nb: u32, rows_here: u32) -> array<f32, 8> {
  var acc: array<f32, 8>;
  let wr = lid / 4u;
  let wq = lid % 4u;
  let xr = lid / 8u;
  let xq = lid % 8u;
  let tr = lid % 16u;
  let tt = lid / 16u;
  for (var b = 0u; b < nb; b++) {
    var wv = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    if (wr < rows_here) {
      let at = w_block(wr, b);
      wv = w_eighth(at.x, at.y, wq);
    }
    let wo = wr * PAD + wq * 8u;
    for (var i = 0u; i < 4u; i++) {
      wt[wo + i] = wv[0][i];
      wt[wo + 4u + i] = wv[1][i];
    }
    let xo = xr * PAD + xq * 4u;
    for (var i = 0u; i < 4u; i++) {
      let e = x_index(xr, b * 32u + xq * 4u + i);
      var v = 0.0;
      if (e >= 0) {
        v = x[u32(e)];
      }
      xt[xo + i] = v;
    }
    workgroupBarrier();
    for (var c = 0u; c < 32u; c++) {
      let x0 = xt[tt * PAD + c];
      let x1 = xt[(tt + 16u) * PAD + c];
      for (var a = 0u; a < 4u; a++) {
        let w = wt[(tr + 16u * a) * PAD + c];
        acc[a * 2u] += w * x0;
        acc[a * 2u + 1u] += w * x1;
      }
    }
    workgroupBarrier();
  }
  return acc;
}
