// The shared expert's contribution to the residual stream (llama.cpp qwen35moe build_layer_ffn):
//   h[i] += sigmoid(Σ_j w[j]·x[j]) · y[i]
// with x the post-attention-normed input, w = ffn_gate_inp_shexp (F32, n values) and y the shared expert's
// output. One workgroup of 256 per token row (workgroup r: x, y, h at r·n), the gate from shared_expert_sigmoid.wgsl.
struct Params { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;

const SUM_LANES: u32 = 256u;
#include "shared_expert_sigmoid.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let rb = wg.x * p.n;
  let gate = shexp_gate(t, rb);
  for (var i = t; i < p.n; i += 256u) {
    h[rb + i] += gate * y[rb + i];
  }
}
