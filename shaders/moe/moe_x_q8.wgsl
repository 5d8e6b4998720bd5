// The activation rows of moe_gemm_few.wgsl already quantised to Q8_0 (moe_gate_up_few.wgsl writes the routed
// down product's input so): block b of row r has its 32 codes at vec4 2·(r·nb + b) and its scale (f32 bits) at u32
// index x_base + r·nb + b. The same codes and scales x_block of moe_x_f32.wgsl would make from the f32 row, read
// instead of made again by every workgroup of the product.
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;

fn x_block(r: u32, b: u32) -> Q8Block {
  let i = r * p.nb + b;
  let c0 = x[2u * i];
  let c1 = x[2u * i + 1u];
  let s = p.x_base + i;
  var q: Q8Block;
  q.codes = array<u32, 8>(c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w);
  q.d = bitcast<f32>(x[s / 4u][s % 4u]);
  return q;
}
