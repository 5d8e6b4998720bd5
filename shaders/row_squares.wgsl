// The sums row_sq_parts.wgsl leaves, for a residual stream that a kernel without it wrote (the streamed experts'
// shexp_down_combine / moe_combine): part g = Σ h[r]² over rows g · per_part .. (g + 1) · per_part - 1 (< n), in
// row order, as moe_down_combine.wgsl (one row per lane group) adds them, so both paths give the next norm the same
// bits. One workgroup per part; per_part <= 256.
struct Params { n: u32, per_part: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read_write> sq_part: array<f32>;

var<workgroup> sq: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let g = wg.y * ng.x + wg.x;
  let t = lid.x;
  if (t < p.per_part) {
    let r = g * p.per_part + t;
    var q = 0.0;
    if (r < p.n) {
      let v = h[r];
      q += v * v;
    }
    sq[t] = q;
  }
  workgroupBarrier();
  if (t == 0u) {
    var s = 0.0;
    for (var j = 0u; j < p.per_part; j++) {
      s += sq[j];
    }
    sq_part[g] = s;
  }
}
