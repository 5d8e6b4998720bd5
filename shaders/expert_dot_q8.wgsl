// One 32-weight Q8_0 block of a streamed expert (codes and f16 scales planes inside a pool slot) dotted with
// x[xv .. xv + 8) (vec4 units). The pool buffer is bound twice, read-only: as vec4<u32> for the codes (a block is
// 32 bytes = 2 vec4) and as u32 for the scales (two f16 per word).
@group(0) @binding(3) var<storage, read> pool_codes: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> pool_scales: array<u32>;

fn expert_dot(base: u32, blk: u32, xv: u32) -> f32 {
  let cv = (base + p.codes_off) / 16u + 2u * blk;
  let c0 = pool_codes[cv];
  let c1 = pool_codes[cv + 1u];
  var s = dot(vec4<f32>(unpack4xI8(c0.x)), x[xv]) + dot(vec4<f32>(unpack4xI8(c0.y)), x[xv + 1u]);
  s += dot(vec4<f32>(unpack4xI8(c0.z)), x[xv + 2u]) + dot(vec4<f32>(unpack4xI8(c0.w)), x[xv + 3u]);
  s += dot(vec4<f32>(unpack4xI8(c1.x)), x[xv + 4u]) + dot(vec4<f32>(unpack4xI8(c1.y)), x[xv + 5u]);
  s += dot(vec4<f32>(unpack4xI8(c1.z)), x[xv + 6u]) + dot(vec4<f32>(unpack4xI8(c1.w)), x[xv + 7u]);
  let sh = (base + p.scales_off) / 2u + blk;  // index of the f16 scale
  return s * unpack2x16float(pool_scales[sh >> 1u])[sh & 1u];
}
