// RMSNorm fused into the staging of a product's input, as x_norm_rms.wgsl, but with the scale taken from the sums
// of squares of x that the product which last wrote x left, one per workgroup (row_sq_parts.wgsl; p.group of them,
// covering all of x): one lane adds them in one fixed order, so there is no pass over x and no tree of barriers
// before the staging. The sums' order differs from rmsnorm.wgsl's: the values agree up to rounding, not in bits.
@group(0) @binding(5) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> xn_out: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> sq_parts: array<vec4<f32>>;   // p.group sums, padded to whole vec4s

#include "xn_store_{{XN}}.wgsl"
#include "x_norm_scaled.wgsl"

const SQ_V4: u32 = {{SQ_V4}}u;   // vec4s holding the p.group sums (the last one partial where p.group % 4 != 0)
var<workgroup> sq_total: f32;

// 1 / sqrt(Σ sums / n + eps). One lane loads them all at once (one memory round trip; every lane loading them
// would read 4x the bytes of a pass over x from the L2 cache in every workgroup), adds them in one fixed order and
// hands the total to the others through workgroup memory: one barrier.
fn rms_scale_parts(tid: u32, n: u32, eps: f32) -> f32 {
  if (tid == 0u) {
    var v: array<vec4<f32>, SQ_V4>;
    for (var i = 0u; i < SQ_V4; i++) {
      v[i] = sq_parts[i];
    }
    var acc = vec4<f32>(0.0);
    for (var i = 0u; i < SQ_V4; i++) {
      acc += select(vec4<f32>(0.0), v[i], vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.group - 4u * i));
    }
    sq_total = (acc.x + acc.y) + (acc.z + acc.w);
  }
  workgroupBarrier();
  return 1.0 / sqrt(sq_total / f32(n) + eps);
}

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  stage_scaled(tid, wg_size, xv0, nb, rms_scale_parts(tid, nb * 32u, eps), write_xn);
}
