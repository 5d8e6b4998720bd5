// RMSNorm of rows of n values (rmsnorm.wgsl's y, the same bits: rms_scale64.wgsl), and y quantised per 32-block
// as a Q8_0 product quantises its input (q8_block.wgsl) into xq: the rows' codes, 2 vec4 per block (block b of row
// r at vec4 2·(r·nb + b)), then their scales (f32 bits, u32 index q_scales + r·nb + b; one row: q_scales = 8·nb,
// right after its codes). The product after it reads xq as is (x_stage_q8pre.wgsl, moe_x_q8.wgsl) instead of
// every one of its workgroups quantising y again. One workgroup of 64 per row (row = wg.x, rows n apart);
// n % 32 == 0; x_base and y_base in vec4s.
struct Params { n: u32, eps: f32, x_base: u32, y_base: u32, q_scales: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> xq: array<vec4<u32>>;

#include "rms_scale64.wgsl"
#include "q8_block.wgsl"
#include "q8_rows_store.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let r = wg.x;
  let xb = p.x_base + r * (p.n / 4u);
  let yb = p.y_base + r * (p.n / 4u);
  let inv = rms_scale64(t, xb, p.n, p.eps);
  let nb = p.n / 32u;
  for (var b = t; b < nb; b += 64u) {
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      v[i] = x[xb + b * 8u + i] * inv * w[b * 8u + i];
      y[yb + b * 8u + i] = v[i];
    }
    store_q8_block(r * nb + b, p.q_scales, q8_block(v));
  }
}
