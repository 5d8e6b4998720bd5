// A Q8_0 product's activations staged in workgroup memory (filled by x_stage_q8.wgsl, which quantises x, or by
// x_stage_q8load.wgsl, which copies codes quantised ahead) and the int8 dot of one weight block against them.
// K <= 32 · XQ_BLOCKS columns. Needs q8_block.wgsl (dot_codes32).
// Sized to the blocks the pipeline stages (STAGED_BLOCKS; at most 256), not to the widest product: on the H200 the
// workgroups a product keeps resident are bounded by their workgroup memory, and 9 KB per workgroup held the
// DeltaNet input product's 772 workgroups (and the routed gate/up's 576 with its ranking) to two waves
// (lab/gpu_probes/wave_sweep.mjs).
const XQ_BLOCKS: u32 = {{STAGED_BLOCKS}}u;
var<workgroup> xq_codes: array<vec4<u32>, 2u * XQ_BLOCKS>;   // 2 per block: 32 int8 codes
var<workgroup> xq_scale: array<f32, XQ_BLOCKS>;              // d_x per block

// (d_w · d_x) · Σ q_w q_x of one block: 32 weight codes (c0, c1) against staged block b.
fn xq_dot(c0: vec4<u32>, c1: vec4<u32>, b: u32, d_w: f32) -> f32 {
  let q0 = xq_codes[2u * b];
  let q1 = xq_codes[2u * b + 1u];
  let s = dot_codes32(c0, c1, q0, q1);
  return (d_w * xq_scale[b]) * f32(s);
}
