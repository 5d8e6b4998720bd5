// The per-token step parameters, written once per token (one writeBuffer): the token being fed, its position,
// and the number of cached positions attention reads after this token is appended (pos + 1).
struct Step { token: u32, pos: u32, n_past: u32, pad: u32 }
