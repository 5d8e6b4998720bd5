// The shared, register-blocked tile loop of the prefill GEMMs over f32 activations (Q8_0 weights × Q8_0
// activations: gemm_tile_q8.wgsl): 128 weight rows × TT activation rows (tokens) per
// workgroup of 256 lanes, TT = 16·TN with TN ({{TILE_TN}}) tokens per lane: 1, 2 or 4 (tiles of 16, 32, 64 tokens,
// chosen per launch so that few tokens do not pay for a wide tile). K advances in steps of 16 columns (half a
// Q8_0 block): the workgroup stages the dequantised weights (lane: 8 columns of one row) and the activations
// (lane: TT/16 columns of one token) transposed, column-major, in workgroup memory (KS × 128 + KS × TT f32, at
// most 12 KiB; neighbouring lanes write neighbouring addresses: no bank conflicts); each lane then
// accumulates 8 weight rows (two vec4 loads: rows 4·tr.. and 64 + 4·tr..) × TN tokens (one vec4 load), 8·TN
// multiply-adds per column, every column in order (the same f32 order as a dot product over K).
// The includer defines x_index(t, col) (-1 for a token outside the tile's data) and w_block(row, b) -> vec2<u32>
// (codes vec4 index, scale index of the weight block) for rows < rows_here.
const TN: u32 = {{TILE_TN}}u;
const TR: u32 = 128u;
const TT: u32 = 16u * TN;
const KS: u32 = 16u;  // columns per staged step
const XC: u32 = TT / 16u;  // activation values one lane stages per step
var<workgroup> wt: array<vec4<f32>, 512>;  // [k][row / 4]: KS × TR / 4
var<workgroup> xt: array<vec4<f32>, 4u * TT>;  // [k][token / 4]: KS × TT / 4

// The lane's staged values of step s (16 columns): 8 weights of row lid % 128, XC activations of token lid % TT.
struct Staged { w: array<vec4<f32>, 2>, x: array<f32, XC> }

fn stage_load(lid: u32, s: u32, rows_here: u32) -> Staged {
  var st: Staged;
  let wr = lid % TR;
  if (wr < rows_here) {
    let at = w_block(wr, s >> 1u);
    st.w = w_eighth(at.x, at.y, 2u * (s & 1u) + lid / TR);
  }
  let xtok = lid % TT;
  let xc0 = (lid / TT) * XC;
  for (var i = 0u; i < XC; i++) {
    let e = x_index(xtok, s * KS + xc0 + i);
    if (e >= 0) {
      st.x[i] = x[u32(e)];
    }
  }
  return st;
}

// acc[2j + h][i] = Σ_col W[64h + 4·(lid % 16) + i][col] · X[TN·(lid / 16) + j][col]. The next step's values are
// read from memory before this step's products, so their latency overlaps the arithmetic.
fn tile_product(lid: u32, nb: u32, rows_here: u32) -> array<vec4<f32>, 2u * TN> {
  var acc: array<vec4<f32>, 2u * TN>;
  let wo = (lid / TR) * 8u * 32u + (lid % TR) / 4u;  // staging: [column][row / 4] of the lane's first weight
  let wc = lid % 4u;
  let xtok = lid % TT;
  let xc0 = (lid / TT) * XC;
  let tr = lid % 16u;
  let tt = lid / 16u;
  let xsub = (tt * TN) % 4u;  // the lane's first token inside its vec4
  let steps = 2u * nb;
  var st = stage_load(lid, 0u, rows_here);
  for (var s = 0u; s < steps; s++) {
    for (var i = 0u; i < 4u; i++) {
      wt[wo + i * 32u][wc] = st.w[0][i];
      wt[wo + (4u + i) * 32u][wc] = st.w[1][i];
    }
    for (var i = 0u; i < XC; i++) {
      xt[((xc0 + i) * TT + xtok) / 4u][xtok % 4u] = st.x[i];
    }
    workgroupBarrier();
    if (s + 1u < steps) {
      st = stage_load(lid, s + 1u, rows_here);
    }
    for (var k = 0u; k < KS; k++) {
      let w0 = wt[k * 32u + tr];
      let w1 = wt[k * 32u + 16u + tr];
      let xv = xt[(k * TT + tt * TN) / 4u];
      for (var j = 0u; j < TN; j++) {
        let xs = xv[xsub + j];
        acc[2u * j] += w0 * xs;
        acc[2u * j + 1u] += w1 * xs;
      }
    }
    workgroupBarrier();
  }
  return acc;
}

#include "gemm_tile_layout.wgsl"
