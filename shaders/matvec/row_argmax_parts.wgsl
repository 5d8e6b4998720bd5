// matvec.wgsl's ARGMAX = parts: workgroup g stores (largest value it wrote, its index y_base + row; ties to the lower
// index) as argmax_part[2 (part_base + g)] (f32 bits) and [.. + 1] (index), the partials argmax_final.wgsl
// reduces: workgroups, and bands in order, cover increasing rows. Every lane must call it.
@group(0) @binding(8) var<storage, read_write> argmax_part: array<u32>;

const ARGMAX_NONE: u32 = 0xffffffffu;
var<workgroup> group_best_v: array<f32, WG>;   // a lane group's best (WG / LANES used)
var<workgroup> group_best_i: array<u32, WG>;

fn store_row_argmax(g: u32, t: u32, row0: u32, vals: vec4<f32>) {
  if (t % LANES == 0u) {   // a group's rows, in increasing order: '>' keeps the lower index
    var bv = -3.4e38;
    var bi = ARGMAX_NONE;
    for (var i = 0u; i < ROWS; i++) {
      if (row0 + i < p.rows && (bi == ARGMAX_NONE || vals[i] > bv)) {
        bv = vals[i];
        bi = p.y_base + row0 + i;
      }
    }
    group_best_v[t / LANES] = bv;
    group_best_i[t / LANES] = bi;
  }
  workgroupBarrier();
  if (t == 0u) {   // the groups cover increasing rows too
    var bv = -3.4e38;
    var bi = ARGMAX_NONE;
    for (var j = 0u; j < WG / LANES; j++) {
      let i = group_best_i[j];
      if (i != ARGMAX_NONE && (bi == ARGMAX_NONE || group_best_v[j] > bv)) {
        bv = group_best_v[j];
        bi = i;
      }
    }
    argmax_part[2u * (p.part_base + g)] = bitcast<u32>(bv);
    argmax_part[2u * (p.part_base + g) + 1u] = bi;
  }
}
