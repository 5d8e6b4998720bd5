// The chunk's rows of n f32 values quantised per 32-block as a Q8_0 product quantises its input (q8_block.wgsl)
// into the quantised-rows layout that rmsnorm_q8.wgsl writes: block b of row r's codes at vec4 2·(r·nb + b), its
// scale (f32 bits) at u32 q_scales + r·nb + b. For a product whose input no norm wrote (the DeltaNet's and the
// attention's output products, the shared expert's down): quantised once here, the int8 GEMM tile copies the codes
// (gemm_x_q8.wgsl) where each of its row workgroups quantised the same X again. One invocation per (row, block):
// workgroups (ceil(nb / 64), T); rows past chunk.n are skipped (the GEMM stages none of them). x_base and
// x_stride in vec4s; n % 32 == 0.
#include "chunk.wgsl"
#include "q8_block.wgsl"
#include "q8_rows_store.wgsl"
struct Params { n: u32, x_base: u32, x_stride: u32, q_scales: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> xq: array<vec4<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let r = wg.y;
  let b = wg.x * 64u + lid.x;
  let nb = p.n / 32u;
  if (r >= chunk.n || b >= nb) {
    return;
  }
  let xb = p.x_base + r * p.x_stride + b * 8u;
  var v: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) {
    v[i] = x[xb + i];
  }
  store_q8_block(r * nb + b, p.q_scales, q8_block(v));
}
