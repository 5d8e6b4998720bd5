// x_norm_rms.wgsl's XN = q8: the workgroup asked to leave xn (write_xn) also stores its 32 values of block b
// quantised as a Q8_0 product quantises its input (q8_block.wgsl) into xq (rmsnorm_q8.wgsl's layout for one row: 2
// vec4 of codes per block, then the nb scales): the product after it copies these codes into its staging
// (x_stage_q8load.wgsl) instead of every one of its workgroups quantising xn again (the routed gate/up: ~7 of its
// ~35 µs on the H200 when timed alone, lab/gpu_probes/route_variants.mjs).
@group(0) @binding(9) var<storage, read_write> xq: array<vec4<u32>>;
#include "q8_block.wgsl"
#include "q8_rows_store.wgsl"

fn store_xn_q8(b: u32, nb: u32, v: array<vec4<f32>, 8>) {
  store_q8_block(b, 8u * nb, q8_block(v));
}
