// The activation rows of the few-picks expert GEMMs (moe_gemm_few.wgsl, moe_gate_up_few.wgsl) as f32: row r
// at r · x_stride + x_base; each 32-value block quantised to Q8_0 when staged (q8_block.wgsl, llama.cpp's rounding).
@group(0) @binding(1) var<storage, read> x: array<f32>;

fn x_block(r: u32, b: u32) -> Q8Block {
  let o = r * p.x_stride + p.x_base + 32u * b;
  var v: array<vec4<f32>, 8>;
  for (var i = 0u; i < 8u; i++) {
    v[i] = vec4<f32>(x[o + 4u * i], x[o + 4u * i + 1u], x[o + 4u * i + 2u], x[o + 4u * i + 3u]);
  }
  return q8_block(v);
}
