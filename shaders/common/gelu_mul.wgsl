// GEGLU: y[y_base + g · n + i] = gelu(x[x_base + g · stride + i]) · x[x_base + g · stride + up + i] for group g
// (workgroup row wg.y: one expert's gate | up rows, or the dense MLP's) and i < n. GELU is the tanh form computed in
// f32 (llama.cpp's ggml_gelu_f32, as its GPU backends run it): 0.5 x (1 + tanh(sqrt(2/π) x (1 + 0.044715 x²))); the
// tanh argument is clamped to ±15 (tanh is ±1 in f32 there), so that no device's exp-based tanh overflows.
struct Params { n: u32, stride: u32, up: u32, x_base: u32, y_base: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n) {
    return;
  }
  let xb = p.x_base + wg.y * p.stride;
  let g = x[xb + i];
  let z = clamp(SQRT_2_OVER_PI * g * (1.0 + 0.044715 * g * g), -15.0, 15.0);
  y[p.y_base + wg.y * p.n + i] = 0.5 * g * (1.0 + tanh(z)) * x[xb + p.up + i];
}
