// Block qb = r·nb + b of rows quantised ahead (q8_block.wgsl's Q8Block) into the layout the int8 products read as
// it is (gemm_x_q8.wgsl, moe_x_q8.wgsl, x_stage_q8pre.wgsl): its codes at vec4 2·qb, its scale (f32 bits) at u32
// q_scales + qb, after every row's codes. The includer binds xq: array<vec4<u32>> (rmsnorm_q8.wgsl,
// quantize_rows_q8.wgsl).
fn store_q8_block(qb: u32, q_scales: u32, q: Q8Block) {
  xq[2u * qb] = vec4<u32>(q.codes[0], q.codes[1], q.codes[2], q.codes[3]);
  xq[2u * qb + 1u] = vec4<u32>(q.codes[4], q.codes[5], q.codes[6], q.codes[7]);
  let s = q_scales + qb;
  xq[s / 4u][s % 4u] = bitcast<u32>(q.d);
}
