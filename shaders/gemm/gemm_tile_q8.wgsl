// The int8 form of the prefill GEMM tile (gemm_tile_f32.wgsl) for Q8_0 weights × Q8_0 activations: the same
// register blocking (128 weight rows × TT = 16·TN tokens per 256-lane workgroup, TN = {{TILE_TN}} tokens and 8 rows
// per lane) and the same interface (tile_product, tile_row, tile_token over the includer's x_index and w_block),
// but K advances KB = 2 Q8_0 blocks (64 columns) per step, staged as int8 codes: the weights' codes as stored, and
// the activations quantised while staging the way llama.cpp's quantize_row_q8_0 does (x_stage_q8.wgsl:
// d = f16(amax / 127), q = round-half-even(x · 127 / amax)); rows already fake-quantised that way give back the
// same codes and d, so raw and fake-quantised inputs alike multiply as llama.cpp's Q8_0 × Q8_0 product. Each lane
// accumulates per block Σ q_w·q_x with dot4I8Packed (exact in i32) for its 8 rows × TN tokens, then adds
// (d_w · d_x) · Σ to its f32 accumulators, block by block in order.
// Staging: lane l loads block l / 128 of the step for weight row l % 128 (2 vec4 of codes, its scale); lane
// l < KB·TT loads one (token, block) of activations: 32 raw values it quantises (XIN = f32: gemm_x_f32.wgsl) or the
// codes and scale quantised ahead (XIN = q8: gemm_x_q8.wgsl); both give the same codes. Codes sit transposed, word-major
// ([block][word][row or token], 4 rows or tokens per vec4), so neighbouring lanes write neighbouring words and
// the compute loop reads one vec4 per 4 rows (or tokens). Workgroup memory: 9 KiB + TT · 72 bytes, ≤ 13.5 KiB.
// Needs from the includer (Q8_0 weights): w_block_codes(cv) and w_block_scale(sh) (gemm_w_q8.wgsl), x with
// x_index(t, col) (XIN = f32) or x_block(t, b) (XIN = q8).

const TN: u32 = {{TILE_TN}}u;
const TR: u32 = 128u;
const TT: u32 = 16u * TN;
const KB: u32 = 2u;  // Q8_0 blocks per staged step
var<workgroup> wq: array<vec4<u32>, 512>;  // [block][word][row / 4]: KB × 8 × TR / 4 code words
var<workgroup> wd: array<vec4<f32>, 64>;  // [block][row / 4]: d_w
var<workgroup> xq: array<vec4<u32>, 4u * TT>;  // [block][word][token / 4]: KB × 8 × TT / 4 code words
var<workgroup> xd: array<f32, 2u * TT>;  // [block][token]: d_x

// The lane's loads of one step: the codes and scale of one weight block, one activation block of one token.
struct Staged { w: array<vec4<u32>, 2>, dw: f32, x: StagedX }
#include "gemm_x_{{XIN}}.wgsl"

fn stage_load(lid: u32, s: u32, nb: u32, rows_here: u32) -> Staged {
  var st: Staged;  // rows, tokens and blocks outside the data stage zeros (or stale values: never written out)
  let wr = lid % TR;
  let wb = s * KB + lid / TR;
  if (wr < rows_here && wb < nb) {
    let at = w_block(wr, wb);
    st.w = w_block_codes(at.x);
    st.dw = w_block_scale(at.y);
  }
  if (lid < KB * TT) {
    st.x = x_stage_load(lid % TT, s * KB + lid / TT, nb);
  }
  return st;
}

// Writes the step's loads into workgroup memory (the activations as codes: x_stage_store).
fn stage_store(lid: u32, st: Staged) {
  let wr = lid % TR;
  let wb = lid / TR;
  for (var i = 0u; i < 4u; i++) {
    wq[(wb * 8u + i) * 32u + wr / 4u][wr % 4u] = st.w[0][i];
    wq[(wb * 8u + 4u + i) * 32u + wr / 4u][wr % 4u] = st.w[1][i];
  }
  wd[wb * 32u + wr / 4u][wr % 4u] = st.dw;
  if (lid < KB * TT) {
    x_stage_store(lid % TT, lid / TT, st.x);
  }
}

// acc[2j + h][i] = Σ_blocks d_w·d_x · Σ q_w·q_x over row 64h + 4·(lid % 16) + i and token TN·(lid / 16) + j. The
// next step is read from memory before this step's products, so its latency overlaps the arithmetic.
fn tile_product(lid: u32, nb: u32, rows_here: u32) -> array<vec4<f32>, 2u * TN> {
  var acc: array<vec4<f32>, 2u * TN>;
  let tr = lid % 16u;
  let tt = lid / 16u;
  let xsub = (tt * TN) % 4u;  // the lane's first token inside its vec4
  let steps = (nb + KB - 1u) / KB;
  var st = stage_load(lid, 0u, nb, rows_here);
  for (var s = 0u; s < steps; s++) {
    stage_store(lid, st);
    workgroupBarrier();
    if (s + 1u < steps) {
      st = stage_load(lid, s + 1u, nb, rows_here);
    }
    let blocks = min(KB, nb - s * KB);
    for (var b = 0u; b < blocks; b++) {
      var sums = array<vec4<i32>, 2u * TN>();  // zeroed explicitly: lavapipe reuses a loop-body var unzeroed
      for (var k = 0u; k < 8u; k++) {
        let w0 = wq[(b * 8u + k) * 32u + tr];
        let w1 = wq[(b * 8u + k) * 32u + 16u + tr];
        let xv = xq[((b * 8u + k) * TT + tt * TN) / 4u];
        for (var j = 0u; j < TN; j++) {
          let xc = xv[xsub + j];
          sums[2u * j] += vec4<i32>(dot4I8Packed(w0.x, xc), dot4I8Packed(w0.y, xc), dot4I8Packed(w0.z, xc),
                                    dot4I8Packed(w0.w, xc));
          sums[2u * j + 1u] += vec4<i32>(dot4I8Packed(w1.x, xc), dot4I8Packed(w1.y, xc), dot4I8Packed(w1.z, xc),
                                         dot4I8Packed(w1.w, xc));
        }
      }
      let d0 = wd[b * 32u + tr];
      let d1 = wd[b * 32u + 16u + tr];
      for (var j = 0u; j < TN; j++) {
        let dx = xd[b * TT + tt * TN + j];
        acc[2u * j] += vec4<f32>(sums[2u * j]) * (d0 * dx);
        acc[2u * j + 1u] += vec4<f32>(sums[2u * j + 1u]) * (d1 * dx);
      }
    }
    workgroupBarrier();
  }
  return acc;
}

#include "gemm_tile_layout.wgsl"
