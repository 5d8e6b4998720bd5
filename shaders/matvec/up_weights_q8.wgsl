// The second weight matrix of a fused pair (the "up" half of gate/up), Q8_0 planes at bindings 7 (codes) and 8
// (f16 scales), laid out as in weights_q8.wgsl; block `blk` times block b of the staged activations.
@group(0) @binding(7) var<storage, read> u_codes: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read> u_scales: array<u32>;

fn up_block_dot_q(blk: u32, b: u32) -> f32 {
  return xq_dot(u_codes[2u * blk], u_codes[2u * blk + 1u], b, unpack2x16float(u_scales[blk >> 1u])[blk & 1u]);
}
