// NeoX RoPE's angle for the dims (i, i + n_rot/2) at position pos: pos · base^(-2i/n_rot) (llama.cpp rope mode
// NEOX, no YaRN scaling), reduced to [-π, π] first, since WGSL only guarantees cos/sin there (a two-part 2π keeps
// the reduction exact enough for positions up to ~10^6). One function for every kernel that rotates, so that they
// rotate with the same bits.
const TWO_PI_HI: f32 = 6.28318548202514648;   // f32(2π)
const TWO_PI_LO: f32 = -1.74845553e-7;        // 2π - f32(2π)

fn rope_angle(pos: f32, i: u32, n_rot: u32, base: f32) -> f32 {
  let a = pos * pow(base, -2.0 * f32(i) / f32(n_rot));
  let k = round(a / TWO_PI_HI);
  return (a - k * TWO_PI_HI) - k * TWO_PI_LO;
}
