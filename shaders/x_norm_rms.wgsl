// RMSNorm fused into the staging of a product's input: xn = x / sqrt(mean(x²) + eps) * norm_w, stored by every
// workgroup into its staging (x_stage_q8.wgsl quantises it; x_stage_f32s.wgsl keeps it f32), so the separate rmsnorm dispatch (and its round trip
// through memory) goes away. The sum of squares follows rmsnorm.wgsl's order exactly (256 strided partial sums,
// then the same tree) so the fused and unfused paths give the same bits. write_xn: this workgroup also stores xn
// (a later kernel, such as the shared expert or a residual path, reads it). Needs wg_size = 64.
@group(0) @binding(5) var<storage, read> norm_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> xn_out: array<vec4<f32>>;

var<workgroup> norm_red: array<f32, 256>;

fn stage_input(tid: u32, wg_size: u32, xv0: u32, nb: u32, eps: f32, write_xn: bool) {
  x_v0 = xv0;
  let n = nb * 32u;
  // Four of rmsnorm.wgsl's 256 threads per lane, 4t .. 4t + 3: their values are the components of every 64th
  // vec4 from t, so the lane reads vec4s (a quarter of the loads, all independent) and keeps the same four sums.
  var acc = vec4<f32>(0.0);
  for (var v = tid; v < n / 4u; v += 64u) {
    let xv = x[xv0 + v];
    acc += xv * xv;
  }
  norm_red[4u * tid] = acc.x;
  norm_red[4u * tid + 1u] = acc.y;
  norm_red[4u * tid + 2u] = acc.z;
  norm_red[4u * tid + 3u] = acc.w;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    for (var vt = tid; vt < s; vt += 64u) {
      norm_red[vt] += norm_red[vt + s];
    }
    workgroupBarrier();
  }
  let inv = 1.0 / sqrt(norm_red[0] / f32(n) + eps);
  for (var b = tid; b < nb; b += wg_size) {
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      v[i] = x[xv0 + b * 8u + i] * inv * norm_w[b * 8u + i];
      if (write_xn) {
        xn_out[b * 8u + i] = v[i];
      }
    }
    x_store_block(b, v);
  }
  workgroupBarrier();
}
