// attention.wgsl's inputs when qk_rope_append.wgsl ran before it: q normed and rotated, the token's K/V already in
// the cache row step.pos.
@group(0) @binding(2) var<storage, read> q: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> k_cache: array<KvWord>;
@group(0) @binding(4) var<storage, read> v_cache: array<KvWord>;

fn stage_q(t: u32, h: u32, kvh: u32, start: u32, end: u32) {
  let pairs = p.hd / 2u;
  for (var j = t; j < pairs; j += WG) {
    q_sh[j] = q[h * pairs + j];
  }
}

// the cache's word as loaded (the token's own row is in the cache)
fn k_word(pos: u32, j: u32, w: KvWord) -> KvWord {
  return w;
}

fn v_word(pos: u32, j: u32, w: KvWord) -> KvWord {
  return w;
}
