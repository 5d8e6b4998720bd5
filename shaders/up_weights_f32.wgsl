// The second weight matrix of a fused pair (the "up" half of gate/up), F32 row-major at binding 7; block `blk`
// (32 weights) dotted with 32 activations already loaded (xs).
@group(0) @binding(7) var<storage, read> u_f32: array<vec4<f32>>;

fn up_block_dot_xs(blk: u32, xs: array<vec4<f32>, 8>) -> f32 {
  let wv = blk * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(u_f32[wv + i], xs[i]);
  }
  return s;
}
