// Prefill GEMM: Y[t·y_stride + y_base + r] (+)= W[r] · X[t·x_stride + x_base ..] for the chunk's token rows
// t < n and the weight rows r < rows of one matrix (or row band). Workgroups: (row tiles of 128, token tiles of
// TT = 16·TILE_TN, K slices). Weights: Q8_0 planes or F32 (WFMT). XFMT f32: weights dequantised into workgroup
// memory, f32 FMAs (gemm_tile_f32.wgsl); XFMT q8 (Q8_0 weights): X quantised to Q8_0 while staging, int8 dot
// products (gemm_tile_q8.wgsl). f32 accumulation. XIN f32: X as f32 rows (gemm_xin_f32.wgsl); XIN q8: X quantised
// ahead (gemm_xin_q8.wgsl, q8 tiles only; rows of K, x_base = where the scales start).
// K slices (a product of few row and token tiles, split so that the GPU has enough workgroups): workgroup z sums
// blocks z·kb_per .. of K and writes its partial at + z·slice_stride (gemm_split_sum.wgsl adds the slices). One
// slice: kb_per = nb.
#include "chunk.wgsl"
struct Params { rows: u32, nb: u32, x_base: u32, x_stride: u32, y_base: u32, y_stride: u32, accumulate: u32,
                 row_base: u32,  // row_base: rows of the weight buffers before W's row 0 (a row view)
                 kb_per: u32, slice_stride: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
#include "gemm_xin_{{XIN}}.wgsl"
#include "gemm_w_{{WFMT}}.wgsl"

var<private> row0: u32;
var<private> tok0: u32;
var<private> kb0: u32;  // the slice's first block

fn w_block(r: u32, b: u32) -> vec2<u32> {
  let blk = (p.row_base + row0 + r) * p.nb + kb0 + b;
  return vec2<u32>(blk * BLK_V, blk);
}

fn x_index(t: u32, col: u32) -> i32 {
  if (tok0 + t >= chunk.n) {
    return -1;
  }
  return i32((tok0 + t) * p.x_stride + p.x_base + 32u * kb0 + col);
}

// Rows quantised ahead (XIN = q8): the index of block b (of the slice) of token t's row, or -1.
fn x_block(t: u32, b: u32) -> i32 {
  if (tok0 + t >= chunk.n) {
    return -1;
  }
  return i32((tok0 + t) * p.nb + kb0 + b);
}

#include "gemm_tile_{{XFMT}}.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  row0 = wg.x * TR;
  tok0 = wg.y * TT;
  kb0 = wg.z * p.kb_per;
  if (wg.y * TT >= chunk.n) {  // not tok0: a private variable does not count as uniform for the barriers
    return;
  }
  let rows_here = min(TR, p.rows - row0);
  let acc = tile_product(lid.x, min(p.kb_per, p.nb - wg.z * p.kb_per), rows_here);
  for (var j = 0u; j < TN; j++) {
    let t = tok0 + tile_token(lid.x, j);
    if (t >= chunk.n) {
      continue;
    }
    for (var h = 0u; h < 2u; h++) {
      for (var i = 0u; i < 4u; i++) {
        let r = tile_row(lid.x, h, i);
        if (r < rows_here) {
          let o = t * p.y_stride + p.y_base + row0 + r + wg.z * p.slice_stride;
          if (p.accumulate != 0u) {
            y[o] += acc[2u * j + h][i];
          } else {
            y[o] = acc[2u * j + h][i];
          }
        }
      }
    }
  }
}
