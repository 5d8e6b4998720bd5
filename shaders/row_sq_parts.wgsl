// SQ = parts: a product that writes the residual stream (matvec.wgsl, moe_down_combine.wgsl) also stores, per
// workgroup, the sum of the squares of the values it wrote, as sq_part[part]: the next RMSNorm takes its scale from
// these sums (x_norm_rmsparts.wgsl) instead of a pass over x in each of its workgroups. Each lane group's rows are
// squared and added in row order, then the groups' sums in order (row_squares.wgsl repeats this order for the
// streamed experts' path). Needs LANES, ROWS and WG; every lane must call it.
@group(0) @binding(10) var<storage, read_write> sq_part: array<f32>;

var<workgroup> group_sq: array<f32, WG / LANES>;

fn store_row_squares(part: u32, t: u32, row0: u32, rows: u32, vals: vec4<f32>) {
  if (t % LANES == 0u) {
    var q = 0.0;
    for (var i = 0u; i < ROWS; i++) {
      if (row0 + i < rows) {
        let v = vals[i];
        q += v * v;
      }
    }
    group_sq[t / LANES] = q;
  }
  workgroupBarrier();
  if (t == 0u) {
    var s = 0.0;
    for (var j = 0u; j < WG / LANES; j++) {
      s += group_sq[j];
    }
    sq_part[part] = s;
  }
}
