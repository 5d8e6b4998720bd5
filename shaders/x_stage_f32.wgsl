// The activation operand read as is, f32: for F32 weights always (llama.cpp multiplies F32 matrices with f32
// inputs), for Q8_0 weights in the engine's f32-activation mode. Same interface as x_stage_q8.wgsl.
var<private> x_v0: u32;   // x's first vec4

fn stage_x(tid: u32, wg_size: u32, xv0: u32, nb: u32) {
  x_v0 = xv0;
}

// A Q8_0 block (codes c0, c1; scale d_w) times f32 activations x[x_v0 + 8b ..]: the engine's f32-activation mode
// (Kernels.q8_act = False), kept to check the kernels' arithmetic against the numpy reference without the
// discontinuities of activation quantisation.
fn xq_dot(c0: vec4<u32>, c1: vec4<u32>, b: u32, d_w: f32) -> f32 {
  let xv = x_v0 + b * 8u;
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), x[xv]) + dot(vec4<f32>(unpack4xI8(c0.y)), x[xv + 1u]);
  s += dot(vec4<f32>(unpack4xI8(c0.z)), x[xv + 2u]) + dot(vec4<f32>(unpack4xI8(c0.w)), x[xv + 3u]);
  s += dot(vec4<f32>(unpack4xI8(c1.x)), x[xv + 4u]) + dot(vec4<f32>(unpack4xI8(c1.y)), x[xv + 5u]);
  s += dot(vec4<f32>(unpack4xI8(c1.z)), x[xv + 6u]) + dot(vec4<f32>(unpack4xI8(c1.w)), x[xv + 7u]);
  return s * d_w;
}
