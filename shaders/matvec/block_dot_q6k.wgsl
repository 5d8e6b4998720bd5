// Block `blk` (32 weights) of a Q6_K matrix (weights_q6k.wgsl: each weight dequantised exactly as ggml does) times
// f32 activations x4(x_v0 + 8b ..): gemma4's tied output head over its Q6_K token table (f32 activations only).
fn block_dot_q(blk: u32, b: u32) -> f32 {
  let e0 = blk * 32u;
  let xv = x_v0 + b * 8u;
  var s = 0.0;
  for (var i = 0u; i < 8u; i++) {
    let e = e0 + 4u * i;
    s += dot(vec4<f32>(w_at(e), w_at(e + 1u), w_at(e + 2u), w_at(e + 3u)), x4(xv + i));
  }
  return s;
}
