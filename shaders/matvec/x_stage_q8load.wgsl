// The activation operand of a Q8_0 product already quantised by the kernel before it (xn_store_q8.wgsl,
// rmsnorm_q8.wgsl: the codes and scales x_stage_q8.wgsl would compute from the same values), copied into the
// workgroup staging x_stage_q8.wgsl fills: per block a lane loads 2 vec4 of codes and a scale instead of quantising
// 32 values, and the products' dots read workgroup memory as they do after x_stage_q8.wgsl. Binding 9 (in place of
// the includer's x, unread) holds, from vec4 xv0: 2 vec4 of codes per block, then the nb block scales (f32 bits), 4
// per vec4. Only Q8_0 weights read it (xq_dot); there is no f32 view.
@group(0) @binding(9) var<storage, read> xq_in: array<vec4<u32>>;
var<private> x_v0: u32;

#include "q8_block.wgsl"
#include "xq_staged.wgsl"

fn stage_x(tid: u32, wg_size: u32, xv0: u32, nb: u32) {
  x_v0 = xv0;
  for (var b = tid; b < nb; b += wg_size) {
    xq_codes[2u * b] = xq_in[xv0 + 2u * b];
    xq_codes[2u * b + 1u] = xq_in[xv0 + 2u * b + 1u];
    xq_scale[b] = bitcast<f32>(xq_in[xv0 + 2u * nb + b / 4u][b % 4u]);
  }
  workgroupBarrier();
}
