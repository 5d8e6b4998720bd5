// attention.wgsl's positions for a sliding-window layer: the last WINDOW ones (a key is masked when
// pos_q - pos_k >= WINDOW, llama.cpp's LLAMA_SWA_TYPE_STANDARD), read from a cache that is a ring of RING rows
// (position pos at row pos % RING; RING >= WINDOW).
const WINDOW: u32 = {{WINDOW}}u;
const RING: u32 = {{RING}}u;

fn span_first(n: u32) -> u32 {
  return n - min(n, WINDOW);
}

fn cache_row(pos: u32) -> u32 {
  return pos % RING;
}
