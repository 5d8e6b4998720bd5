// argmax_final.wgsl's step after the argmax where the step parameters are written by the host for every token.
fn after_argmax(id: u32) {}
