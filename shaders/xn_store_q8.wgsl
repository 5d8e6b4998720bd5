// As xn_store_f32.wgsl, and the same 32 values quantised as a Q8_0 product quantises its input (q8_block.wgsl) into
// xq (rmsnorm_q8.wgsl's layout for one row: 2 vec4 of codes per block, then the nb scales): the product after it
// copies these codes into its staging (x_stage_q8load.wgsl) instead of every one of its workgroups quantising xn
// again (the routed gate/up: ~7 of its ~35 µs on the H200 when timed alone, tools/h200/route_variants.mjs).
@group(0) @binding(9) var<storage, read_write> xq: array<vec4<u32>>;
#include "q8_block.wgsl"
#include "q8_rows_store.wgsl"

fn store_xn_block(b: u32, nb: u32, v: array<vec4<f32>, 8>) {
  for (var i = 0u; i < 8u; i++) {
    xn_out[b * 8u + i] = v[i];
  }
  store_q8_block(b, 8u * nb, q8_block(v));
}
