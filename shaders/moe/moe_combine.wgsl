// Weighted sum of the k routed experts' outputs onto the residual stream: h[i] += Σ_k route_w[k] · y[k * n + i].
struct Params { n: u32, k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> route_w: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> h: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n) {
    return;
  }
  var s = 0.0;
  for (var k = 0u; k < p.k; k++) {
    s += route_w[k] * y[k * p.n + i];
  }
  h[i] += s;
}
