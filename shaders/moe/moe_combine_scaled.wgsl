// The routed experts' sum with a per-expert output scale (gemma4's ffn_down_exps.scale):
// y[t·n + i] = Σ_j (route_w[t·k + j] · scale[route_ids[t·k + j]]) · down[(t·k + j) · n + i] for row t = wg.y (one
// decode token, or a prefill chunk's rows).
struct Params { n: u32, k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> route_w: array<f32>;
@group(0) @binding(2) var<storage, read> route_ids: array<u32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> down: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let t = gid.y;
  if (i >= p.n) {
    return;
  }
  var s = 0.0;
  for (var j = t * p.k; j < (t + 1u) * p.k; j++) {
    s += (route_w[j] * scale[route_ids[j]]) * down[j * p.n + i];
  }
  y[t * p.n + i] = s;
}
