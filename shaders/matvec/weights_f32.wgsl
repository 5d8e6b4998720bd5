// F32 weights, row-major (a GGUF F32 matrix as stored); element e = row * K + col.
@group(0) @binding(3) var<storage, read> w_f32: array<vec4<f32>>;

fn w_at(e: u32) -> f32 {
  return w_f32[e >> 2u][e & 3u];
}
