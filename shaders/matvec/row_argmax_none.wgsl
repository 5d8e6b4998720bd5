// matvec.wgsl's ARGMAX = none: the product stores no argmax partials.
fn store_row_argmax(g: u32, t: u32, row0: u32, vals: vec4<f32>) {}
