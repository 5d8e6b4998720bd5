// The second weight matrix of a fused pair (the "up" half of gate/up), F32 row-major at binding 7; block `blk`
// (32 weights) times activations x[x_v0 + 8b ..] (vec4 units, as read by x_stage_*.wgsl).
@group(0) @binding(7) var<storage, read> u_f32: array<vec4<f32>>;

fn up_block_dot_q(blk: u32, b: u32) -> f32 {
  let wv = blk * 8u;
  let xv = x_v0 + b * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    s += dot(u_f32[wv + i], x[xv + i]);
  }
  return s;
}
