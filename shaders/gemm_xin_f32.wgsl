// gemm.wgsl's activation rows as f32 (binding 2; each int8 tile quantises the blocks it stages).
@group(0) @binding(2) var<storage, read> x: array<f32>;
#include "gemm_x_quantise.wgsl"
