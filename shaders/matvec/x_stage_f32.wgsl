// The activation operand read as is, f32: for F32 weights always (llama.cpp multiplies F32 matrices with f32
// inputs), for Q8_0 weights in the engine's f32-activation mode. Same interface as x_stage_q8.wgsl.
var<private> x_v0: u32;   // x's first vec4

fn stage_x(tid: u32, wg_size: u32, xv0: u32, nb: u32) {
  x_v0 = xv0;
}

fn x4(v: u32) -> vec4<f32> {
  return x[v];
}

// A Q8_0 block times f32 activations (the engine's f32-activation mode, Kernels.q8_act = False), kept to check
// the kernels' arithmetic against the numpy reference without the discontinuities of activation quantisation.
#include "xq_dot_f32.wgsl"
