// gdn_conv_recurrent.wgsl's output with the gated RMSNorm's per-value factors applied: out = o · norm_w · silu(z),
// z at dn[p.z_base + h · dv + j]; each workgroup's Σ o² over its columns at sq_parts[h · parts + wg.x]
// (parts = dv / COLS per head), which x_norm_pregated.wgsl sums into each head's norm. The product's staging then
// loads its input and those partials in one step: no pass over o for the sums, and one barrier fewer.
@group(0) @binding(9) var<storage, read> norm_w: array<f32>;
@group(0) @binding(10) var<storage, read_write> sq_parts: array<f32>;
const OUT_SQ: bool = true;

fn out_weight(h: u32, j: u32) -> f32 {
  let z = dn[p.z_base + h * p.dv + j];
  return norm_w[j] * (z / (1.0 + exp(-z)));
}

fn out_sq(h: u32, part: u32, sq: f32) {
  sq_parts[h * ((p.dv + COLS - 1u) / COLS) + part] = sq;
}
