// gemm.wgsl's activation rows quantised ahead by the norm that wrote them (rmsnorm_q8.wgsl over the chunk's rows:
// block b of row r has its codes at vec4 2·(r·nb + b) and its scale at u32 x_base + r·nb + b), read by the int8
// tile's staging as they are (gemm_x_q8.wgsl).
@group(0) @binding(2) var<storage, read> x: array<vec4<u32>>;
