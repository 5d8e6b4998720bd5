// Q8_0 rows of the token table held by the row cache (py_engine/engine/embedding_rows.py), one plane of its slots:
//   a row = its n int8 codes (4 per u32, byte order) then its f16 block scales (2 per u32) from word scales_word;
//   slot s of this plane starts at word (s % slots_per_plane) * stride_words; slot_map[token] names the slot of a
//   resident row (0xFFFFFFFF: absent). The value is code * scale in f32, as weights_q8.wgsl's w_at computes it.
// Includers declare `p` with fields n, stride_words, scales_word, slots_per_plane, plane, table_rows.
@group(0) @binding(3) var<storage, read> slot_map: array<u32>;
@group(0) @binding(4) var<storage, read> cached_rows: array<u32>;

const ABSENT_ROW: u32 = 0xFFFFFFFFu;

fn cached_slot(tok: u32) -> u32 {
  if (tok >= p.table_rows) {
    return ABSENT_ROW;
  }
  return slot_map[tok];
}

fn cached_at(slot: u32, i: u32) -> f32 {
  let base = (slot % p.slots_per_plane) * p.stride_words;
  let code = unpack4xI8(cached_rows[base + (i >> 2u)])[i & 3u];
  let scale = unpack2x16float(cached_rows[base + p.scales_word + (i >> 6u)])[(i >> 5u) & 1u];
  return f32(code) * scale;
}
