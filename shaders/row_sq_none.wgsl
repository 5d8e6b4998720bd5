// SQ = none: the product leaves no sums of squares (row_sq_parts.wgsl is the alternative, same interface).
fn store_row_squares(part: u32, t: u32, row0: u32, rows: u32, vals: vec4<f32>) {}
