// The per-token step parameters, written once per token (one writeBuffer): the token being fed, its position,
// and the number of cached positions attention reads after this token is appended (pos + 1). pad = 1: a queued
// greedy step whose argmax writes the next step's parameters here (argmax_step_next.wgsl).
struct Step { token: u32, pos: u32, n_past: u32, pad: u32 }
