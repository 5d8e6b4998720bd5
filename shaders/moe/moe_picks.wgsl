// What the prefill's routed-expert GEMMs (moe_gemm.wgsl, moe_gemm_few.wgsl, moe_gate_up_few.wgsl) share:
// their parameters and bindings (x and y are each kernel's own), and which picks and weights a workgroup of expert e
// has. The picks come grouped by expert
// (moe_group.wgsl: counts[n_exp] | offsets[n_exp] | picks); pick p's output row is y[p · rows ..] and it reads
// x[(p / x_div) · x_stride + x_base ..] (gate/up: x_div = k, every pick of a token reads its normed row; down:
// x_div = 1, each pick its own activation). The expert's weights sit in slot slot_map[map_base + e] of a pool:
// slots of `spb` per buffer, this dispatch reads buffer `buf` (a partial pool spans several buffers: one dispatch
// each); inside a slot the codes start at vec4 index local · code_stride + codes_off and the f16 scales at
// local · scale_stride + scales_off. An expert that is absent, in another buffer, or masked off (mask[e] == 0: a
// later paging group computes it) has no picks here.
struct Params {
  rows: u32, nb: u32, x_base: u32, x_stride: u32,
  x_div: u32, map_base: u32, n_exp: u32, buf: u32,
  spb: u32, code_stride: u32, scale_stride: u32, codes_off: u32,
  scales_off: u32, codes_off2: u32, scales_off2: u32, y_scales: u32,
}
// codes_off2 / scales_off2: a second pool's offsets in the same slots (moe_gate_up_few.wgsl's up weights);
// y_scales: where an output quantised to Q8_0 keeps its block scales (u32 index).
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> slot_map: array<u32>;
@group(0) @binding(6) var<storage, read> grouped: array<u32>;  // counts[n_exp] | offsets[n_exp] | picks
@group(0) @binding(7) var<storage, read> mask: array<u32>;

const ABSENT: u32 = 0xFFFFFFFFu;
var<workgroup> todo: u32;

// The number of picks expert e has in this dispatch (0: nothing to do), uniform over the workgroup; every lane
// calls it.
fn expert_picks(e: u32, lid: u32) -> u32 {
  if (lid == 0u) {
    var n = grouped[e];
    let slot = slot_map[p.map_base + e];
    if (slot == ABSENT || slot / p.spb != p.buf || mask[e] == 0u) {
      n = 0u;
    }
    todo = n;
  }
  return workgroupUniformLoad(&todo);
}

// Where expert e's codes (vec4 index) and scales (f16 index) start in the bound buffer.
fn expert_weights(e: u32) -> vec2<u32> {
  let lslot = slot_map[p.map_base + e] % p.spb;
  return vec2<u32>(lslot * p.code_stride + p.codes_off, lslot * p.scale_stride + p.scales_off);
}

// Index in `grouped` of expert e's pick number i.
fn pick_at(e: u32, i: u32) -> u32 {
  return 2u * p.n_exp + grouped[p.n_exp + e] + i;
}
