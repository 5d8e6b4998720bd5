// Row gather through the row cache: out[i] = the cached row of ids[i], copied as u32 words.
//   slot  = slot_map[ids[i]]                 0xFFFFFFFF when row ids[i] is not in the cache
//   plane = slot / slots_per_plane           the cache is split over several buffers (binding size limit)
//   word w of the row at rows[(slot % slots_per_plane) * stride_words + w] of that plane's buffer
// One dispatch per plane buffer (a shader cannot index a variable number of bindings); each dispatch copies only
// the rows whose slot lies in its plane. The plane-0 dispatch also zeroes the output of absent rows and counts
// them into status[0], so a caller that forgot a lookup gets zeros and a non-zero count, never another row.
// Grid: x covers the row's words (64 per workgroup), y = i, the index into ids.
struct Params {
  n_ids: u32,
  row_words: u32,
  stride_words: u32,
  slots_per_plane: u32,
  plane: u32,
  table_rows: u32,
  pad0: u32,
  pad1: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> slot_map: array<u32>;
@group(0) @binding(3) var<storage, read> rows: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;
@group(0) @binding(5) var<storage, read_write> status: array<atomic<u32>>;

const ABSENT: u32 = 0xFFFFFFFFu;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.y;
  let w = gid.x;
  if (i >= p.n_ids || w >= p.row_words) {
    return;
  }
  let id = ids[i];
  var slot = ABSENT;
  if (id < p.table_rows) {
    slot = slot_map[id];
  }
  let dst = i * p.row_words + w;
  if (slot == ABSENT) {
    if (p.plane == 0u) {
      out[dst] = 0u;
      if (w == 0u) {
        atomicAdd(&status[0], 1u);
      }
    }
    return;
  }
  if (slot / p.slots_per_plane != p.plane) {
    return;
  }
  out[dst] = rows[(slot % p.slots_per_plane) * p.stride_words + w];
}
