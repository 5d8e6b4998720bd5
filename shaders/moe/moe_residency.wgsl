// Residency check of one layer's routed experts, on the GPU. For each of the k picked ids:
//   route_slots[i] = slot_map[map_base + id]   (0xFFFFFFFF when the expert is not in the pool)
//   route_hist[layer * k + i] = id             (the token's routing, read back with the token's result)
// When any picked expert is absent, the token stops here: status[0] counts the stop, status[1] = layer + 1, and
// the x workgroup count of every guarded dispatch after this one is zeroed (`args`, the indirect arguments of the
// rest of the token: entries guard_from .. guard.count), so nothing after the check runs (nor reads a wrong
// slot). The CPU then pages the layer's experts in and resumes the token at this check: work before it, a
// recurrent layer's state update included, is never run twice. With guard.count = 0 (every expert resident, or
// the per-layer mode) nothing is zeroed. status[1] is cleared by the engine before each submit.
struct Params { map_base: u32, k: u32, layer: u32, guard_from: u32 }
struct Guard { count: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> route_ids: array<u32>;
@group(0) @binding(2) var<storage, read> slot_map: array<u32>;
@group(0) @binding(3) var<storage, read_write> route_slots: array<u32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> route_hist: array<u32>;
@group(0) @binding(6) var<storage, read_write> args: array<u32>;
@group(0) @binding(7) var<uniform> guard: Guard;

const ABSENT: u32 = 0xFFFFFFFFu;
var<workgroup> missing: atomic<u32>;
var<workgroup> stopped: u32;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let i = lid.x;
  if (i == 0u) {
    stopped = atomicLoad(&status[1]);
    atomicStore(&missing, 0u);
  }
  // The checks themselves are direct dispatches (they write the indirect args, so they cannot read them): a check
  // after a stop in the same submit sees the flag and does nothing.
  if (workgroupUniformLoad(&stopped) != 0u) {
    return;
  }
  if (i < p.k) {
    let id = route_ids[i];
    route_hist[p.layer * p.k + i] = id;
    let slot = slot_map[p.map_base + id];
    route_slots[i] = slot;
    if (slot == ABSENT) {
      atomicAdd(&missing, 1u);
    }
  }
  workgroupBarrier();
  if (atomicLoad(&missing) == 0u) {
    return;
  }
  if (i == 0u) {
    atomicAdd(&status[0], 1u);
    atomicStore(&status[1], p.layer + 1u);
  }
  for (var j = p.guard_from + i; j < guard.count; j += 64u) {
    args[3u * j] = 0u;
  }
}
