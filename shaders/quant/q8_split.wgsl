// Q8_0 block stream -> code plane + f16 scale plane, on the GPU (the layout of py_engine.gguf.split_q8_0).
// A Q8_0 block is 34 bytes: f16 scale, 32 int8 codes. Blocks start at 34*b, so only every second block is
// 4-byte aligned: a *pair* of blocks is 68 bytes = 17 u32 words starting at word 17*pair. Within a pair:
//   block A (2*pair):   scale = low half of raw[0]; code word k (k < 8) = raw[k] >> 16 | raw[k + 1] << 16
//   block B (2*pair+1): scale = high half of raw[8]; code word k = raw[9 + k] (aligned)
// One thread per pair: it writes the pair's 16 code words and its scale word (two f16 per u32; a zero high half
// for an odd last block). On lavapipe this ran ~6x faster than a thread per code word (fewer invocations).
// `raw` holds p.n_blocks blocks from word 0, its length rounded up to 4 bytes (an odd last block reads raw[8] of
// its pair, whose low half is that block's last two codes). Grid: y * nx + x over 64-thread groups.
struct Params {
  n_blocks: u32,
  code_word_base: u32,   // where block 0's codes go in `codes`, in u32 words (8 per block)
  scale_word_base: u32,  // where block 0's scale goes in `scales`, in u32 words (block 0 is even: a word start)
  nx: u32,               // workgroups along x (the grid is 2-D when one dimension is not enough)
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> raw: array<u32>;
@group(0) @binding(2) var<storage, read_write> codes: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let pair = gid.y * p.nx * 64u + gid.x;
  let a = pair * 2u;
  if (a >= p.n_blocks) {
    return;
  }
  let base = pair * 17u;
  let out = p.code_word_base + pair * 16u;
  var prev = raw[base];
  var s = prev & 0xFFFFu;
  for (var k = 0u; k < 8u; k++) {
    let next = raw[base + k + 1u];
    codes[out + k] = (prev >> 16u) | (next << 16u);
    prev = next;
  }
  if (a + 1u < p.n_blocks) {
    s = s | (prev & 0xFFFF0000u);
    for (var k = 0u; k < 8u; k++) {
      codes[out + 8u + k] = raw[base + 9u + k];
    }
  }
  scales[p.scale_word_base + pair] = s;
}
