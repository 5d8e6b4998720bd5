// RMSNorm fused into the staging of a product's input, as x_norm_rms.wgsl, but with the scale taken from the sums
// of squares of x that the product which last wrote x left, one per workgroup (row_sq_parts.wgsl; p.group of them,
// covering all of x): every lane adds them in one fixed order, so there is no pass over x and no tree of barriers
// before the staging. The sums' order differs from rmsnorm.wgsl's: the values agree up to rounding, not in bits.
@group(0) @binding(5) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> xn_out: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> sq_parts: array<vec4<f32>>;   // p.group sums, padded to whole vec4s

#include "xn_store_{{XN}}.wgsl"
#include "x_norm_scaled.wgsl"

// 1 / sqrt(Σ sums / n + eps) over `count` sums: eight vec4 loads in flight per step, added in order, then the tail.
fn rms_scale_parts(count: u32, n: u32, eps: f32) -> f32 {
  var acc = vec4<f32>(0.0);
  var i = 0u;
  for (; i + 8u <= count / 4u; i += 8u) {
    var v: array<vec4<f32>, 8>;
    for (var u = 0u; u < 8u; u++) {
      v[u] = sq_parts[i + u];
    }
    for (var u = 0u; u < 8u; u++) {
      acc += v[u];
    }
  }
  for (; i < count / 4u; i++) {
    acc += sq_parts[i];
  }
  var s = (acc.x + acc.y) + (acc.z + acc.w);
  if (count % 4u != 0u) {
    let last = sq_parts[count / 4u];
    for (var j = 0u; j < count % 4u; j++) {
      s += last[j];
    }
  }
  return 1.0 / sqrt(s / f32(n) + eps);
}

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  stage_scaled(tid, wg_size, xv0, nb, rms_scale_parts(p.group, nb * 32u, eps), write_xn);
}
