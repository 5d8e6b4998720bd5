// The per-chunk parameters of batched prefill, written once per chunk (one writeBuffer): how many of the chunk's
// rows hold tokens (n <= the recorded chunk size) and the position of row 0. `pos0` sits where Step keeps `pos`,
// so a per-token kernel that offsets its position by its row (qk_norm_rope.wgsl) can bind this uniform as `step`.
struct Chunk { n: u32, pos0: u32, pad0: u32, pad1: u32 }
