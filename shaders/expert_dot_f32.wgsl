// 32 F32 weights of a streamed expert (stored raw in the record's codes sub-plane, row-major) dotted with
// x[xv .. xv + 8) (vec4 units). Binding 4 (scales) is unused for F32 records.
@group(0) @binding(3) var<storage, read> pool_f32: array<vec4<f32>>;

fn expert_dot(base: u32, blk: u32, xv: u32) -> f32 {
  let wv = (base + p.codes_off) / 16u + 8u * blk;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(pool_f32[wv + i], x[xv + i]);
  }
  return s;
}
