// Final logit soft-capping (gemma4's final_logit_softcapping): y[i] = cap · tanh(y[i] / cap), and the same for the
// largest logit the output head's argmax left in best[1] (its index in best[0] stays: tanh keeps the order).
// tanh's argument is clamped to ±15 (±1 in f32 there), so that no device's exp-based tanh overflows.
struct Params { n: u32, cap: f32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> best: array<f32>;

fn capped(v: f32) -> f32 {
  return p.cap * tanh(clamp(v / p.cap, -15.0, 15.0));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
  let i = gid.y * ng.x * 256u + gid.x;
  if (i == 0u) {
    best[1] = capped(best[1]);
  }
  if (i < p.n) {
    y[i] = capped(y[i]);
  }
}
