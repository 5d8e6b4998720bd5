// attention.wgsl's positions: every cached one, each at its own row of the cache.
fn span_first(n: u32) -> u32 {
  return 0u;
}

fn cache_row(pos: u32) -> u32 {
  return pos;
}
