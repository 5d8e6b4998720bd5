// The end of a qwen35moe FFN block in one pass (moe_combine.wgsl then shared_expert_gate.wgsl, same order):
//   h[i] = h[i] + Σ_k route_w[k] · down[k * n + i] + sigmoid(Σ_j w[j] · x[j]) · shexp[i]
// with x the post-attention-normed input, w = ffn_gate_inp_shexp (F32, n values) and shexp the shared expert's
// output. Each workgroup of 256 owns 256 values of h and computes the gate itself (shexp_gate.wgsl: n MACs), so no
// second pass is needed.
struct Params { n: u32, k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> route_w: array<f32>;
@group(0) @binding(2) var<storage, read> down: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read> shexp: array<f32>;
@group(0) @binding(6) var<storage, read_write> h: array<f32>;

var<workgroup> red: array<f32, 256>;
#include "shexp_gate.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let gate = shexp_gate(t, 0u);
  let i = wg.x * 256u + t;
  if (i >= p.n) {
    return;
  }
  var routed = 0.0;
  for (var k = 0u; k < p.k; k++) {
    routed += route_w[k] * down[k * p.n + i];
  }
  h[i] = h[i] + routed + gate * shexp[i];
}
