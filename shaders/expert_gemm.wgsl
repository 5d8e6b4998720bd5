// Prefill routed-expert GEMM over the chunk's picks grouped by expert (moe_group.wgsl). Workgroup (row tile,
// expert e): for the picks routed to e, in tiles of TT (16·TILE_TN),
//   y[pick · rows + r] = W_e[r] · x[(pick / x_div) · x_stride + x_base ..]
// (gate/up: x_div = k, every pick of a token reads its normed row; down: x_div = 1, each pick its own activation).
// The tile: gemm_tile_{XFMT}.wgsl (q8: Q8_0 weights × x quantised to Q8_0 while staging, int8 dot products).
// The expert's weights sit in slot slot_map[map_base + e] of a pool: slots of `spb` per buffer, this dispatch
// reads buffer `buf` (a partial pool spans several buffers: one dispatch each); inside a slot the codes start at
// vec4 index local · code_stride + codes_off and the f16 scales at local · scale_stride + scales_off. An expert
// that is absent, in another buffer, or masked off (mask[e] == 0: a later paging group computes it) is skipped.
struct Params {
  rows: u32, nb: u32, x_base: u32, x_stride: u32,
  x_div: u32, map_base: u32, n_exp: u32, buf: u32,
  spb: u32, code_stride: u32, scale_stride: u32, codes_off: u32,
  scales_off: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#include "gemm_w_{{WFMT}}.wgsl"
@group(0) @binding(5) var<storage, read> slot_map: array<u32>;
@group(0) @binding(6) var<storage, read> grouped: array<u32>;  // counts[n_exp] | offsets[n_exp] | picks
@group(0) @binding(7) var<storage, read> mask: array<u32>;

const ABSENT: u32 = 0xFFFFFFFFu;
var<private> row0: u32;
var<private> cv0: u32;
var<private> sh0: u32;
var<private> first: u32;  // index of the tile's first pick in `group`
var<private> n_tile: u32;  // picks in this tile
var<workgroup> todo: u32;

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
  if (lid.x == 0u) {
    var n = grouped[e];
    let slot = slot_map[p.map_base + e];
    if (slot == ABSENT || slot / p.spb != p.buf || mask[e] == 0u) {
      n = 0u;
    }
    todo = n;
  }
  let total = workgroupUniformLoad(&todo);
  if (total == 0u) {
    return;
  }
  let lslot = slot_map[p.map_base + e] % p.spb;
  cv0 = lslot * p.code_stride + p.codes_off;
  sh0 = lslot * p.scale_stride + p.scales_off;
  let rows_here = min(TR, p.rows - row0);
  for (var t0 = 0u; t0 < total; t0 += TT) {
    first = 2u * p.n_exp + grouped[p.n_exp + e] + t0;
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
