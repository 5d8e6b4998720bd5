// SwiGLU gate: y[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + e^-x), over n values at the given bases.
struct Params { n: u32, gate_base: u32, up_base: u32, y_base: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n) {
    return;
  }
  let g = gate[p.gate_base + i];
  y[p.y_base + i] = g / (1.0 + exp(-g)) * up[p.up_base + i];
}
