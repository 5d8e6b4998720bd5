// The lane layout of the one-token DeltaNet recurrence (gdn_conv_recurrent.wgsl): a workgroup of 256 covers COLS
// value columns j of a head's state S; the SLICES lanes of a column split its key rows (i ≡ slice mod SLICES) and
// keep them in registers (MAX_ROWS each); a row's q and k staged in workgroup memory (also by the chunk's q/k
// scales pass, gdn_qk_scales.wgsl).
const WG: u32 = 256u;
const COLS: u32 = {{GDN_COLS}}u;      // value columns per workgroup (qwen35_kernels.GDN_COLS)
const SLICES: u32 = WG / COLS;         // lanes per column, each over key rows i ≡ slice (mod SLICES)
const MAX_DK: u32 = {{MAX_DK}}u;      // the pipeline's key head size, rounded up to SLICES (at most 256)
const MAX_ROWS: u32 = MAX_DK / SLICES; // key rows one lane keeps
var<workgroup> q_sh: array<f32, MAX_DK>;
var<workgroup> k_sh: array<f32, MAX_DK>;
