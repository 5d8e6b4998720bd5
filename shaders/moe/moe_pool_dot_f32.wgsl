// 32 F32 weights of a streamed expert (stored raw in the record's codes sub-plane, row-major) times activations
// x[x_v0 + 8b ..] (vec4 units; x_stage_f32.wgsl). Binding 4 (scales) is unused for F32 records.
@group(0) @binding(3) var<storage, read> pool_f32: array<vec4<f32>>;

fn expert_dot_q(base: u32, blk: u32, b: u32) -> f32 {
  let wv = (base + p.codes_off) / 16u + 8u * blk;
  let xv = x_v0 + b * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(pool_f32[wv + i], x[xv + i]);
  }
  return s;
}
