// gemm.wgsl's activation rows as f32 (binding 2): the f32 tile reads them, the int8 tile quantises the blocks it
// stages (gemm_x_f32.wgsl).
@group(0) @binding(2) var<storage, read> x: array<f32>;
