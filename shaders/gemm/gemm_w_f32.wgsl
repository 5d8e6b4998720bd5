// F32 weights for the tiled GEMMs: row-major values read as vec4<f32> (a 32-column block = 8 vec4); `sh` unused.
@group(0) @binding(3) var<storage, read> w_f32: array<vec4<f32>>;
const BLK_V: u32 = 8u;  // vec4 words per block

fn w_eighth(cv: u32, sh: u32, q: u32) -> array<vec4<f32>, 2> {
  return array<vec4<f32>, 2>(w_f32[cv + 2u * q], w_f32[cv + 2u * q + 1u]);
}
