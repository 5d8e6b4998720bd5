// Prefill routed-expert GEMM over the chunk's picks grouped by expert (moe_picks.wgsl). Workgroup (row tile,
// expert e): for the picks routed to e, in tiles of TT (16·TILE_TN),
//   y[pick · rows + r] = W_e[r] · x[(pick / x_div) · x_stride + x_base ..]
// The tile: gemm_tile_{XFMT}.wgsl (q8: Q8_0 weights × x quantised to Q8_0 while staging, int8 dot products).
#include "moe_picks.wgsl"
#include "gemm_w_{{WFMT}}.wgsl"
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

var<private> row0: u32;
var<private> cv0: u32;
var<private> sh0: u32;
var<private> first: u32;  // index of the tile's first pick in `group`
var<private> n_tile: u32;  // picks in this tile

fn w_block(r: u32, b: u32) -> vec2<u32> {
  let blk = (row0 + r) * p.nb + b;
  return vec2<u32>(cv0 + blk * BLK_V, sh0 + blk);
}

fn x_index(t: u32, col: u32) -> i32 {
  if (t >= n_tile) {
    return -1;
  }
  let pick = grouped[first + t];
  return i32((pick / p.x_div) * p.x_stride + p.x_base + col);
}

#include "gemm_tile_{{XFMT}}.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let e = wg.y;
  row0 = wg.x * TR;
  let total = expert_picks(e, lid.x);
  if (total == 0u) {
    return;
  }
  let at = expert_weights(e);
  cv0 = at.x;
  sh0 = at.y;
  let rows_here = min(TR, p.rows - row0);
  for (var t0 = 0u; t0 < total; t0 += TT) {
    first = pick_at(e, t0);
    n_tile = min(TT, total - t0);
    let acc = tile_product(lid.x, p.nb, rows_here);
    for (var j = 0u; j < TN; j++) {
      let t = tile_token(lid.x, j);
      if (t >= n_tile) {
        continue;
      }
      let base = grouped[first + t] * p.rows + row0;
      for (var h = 0u; h < 2u; h++) {
        for (var i = 0u; i < 4u; i++) {
          let r = tile_row(lid.x, h, i);
          if (r < rows_here) {
            y[base + r] = acc[2u * j + h][i];
          }
        }
      }
    }
  }
}
