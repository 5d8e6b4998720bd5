// 1 / sqrt(mean(x²) + eps) over n values of x from vec4 xv0 (n % 4 == 0), by a workgroup of 64 lanes, with
// rmsnorm.wgsl's arithmetic: its 256 threads' strided partial sums, then the same tree, so every kernel that
// normalises this way gives rmsnorm.wgsl's bits. Lane t plays threads 4t .. 4t + 3: their values are the
// components of every 64th vec4 from t, so it reads vec4s (a quarter of the loads, all independent) and keeps the
// same four sums; it issues four of its loads before adding their squares (a loop that adds each load before it
// issues the next waits for them in turn, and every workgroup of a norm-fused product runs this first). The includer
// declares `x: array<vec4<f32>>`; every lane must call it (barriers).
var<workgroup> norm_red: array<f32, 256>;

fn rms_scale64(tid: u32, xv0: u32, n: u32, eps: f32) -> f32 {
  var acc = vec4<f32>(0.0);
  var v = tid;
  for (; v + 192u < n / 4u; v += 256u) {  // 4 loads in flight, then their squares added in order
    var xv: array<vec4<f32>, 4>;
    for (var u = 0u; u < 4u; u++) {
      xv[u] = x[xv0 + v + 64u * u];
    }
    for (var u = 0u; u < 4u; u++) {
      acc += xv[u] * xv[u];
    }
  }
  for (; v < n / 4u; v += 64u) {
    let xv = x[xv0 + v];
    acc += xv * xv;
  }
  norm_red[4u * tid] = acc.x;
  norm_red[4u * tid + 1u] = acc.y;
  norm_red[4u * tid + 2u] = acc.z;
  norm_red[4u * tid + 3u] = acc.w;
  workgroupBarrier();
  for (var s = 128u; s > 1u; s >>= 2u) {   // two levels per barrier, the same association (row_reduce4.wgsl)
    let h = s / 2u;
    if (tid < h) {
      norm_red[tid] = (norm_red[tid] + norm_red[tid + s]) + (norm_red[tid + h] + norm_red[tid + h + s]);
    }
    workgroupBarrier();
  }
  return 1.0 / sqrt(norm_red[0] / f32(n) + eps);
}
