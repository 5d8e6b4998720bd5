// Bench only (lab/engine_bench/trace_routing.py): a layer's routed expert ids replaced by a routing trace's picks
// for the current token, written into `trace` before each token. Recorded after the router's top-k and before the
// layer's residency check, so the check, the stops, the readbacks and the expert products all follow the trace;
// the routing weights stay the router's.
struct Params { base: u32, k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> trace: array<u32>;
@group(0) @binding(2) var<storage, read_write> route_ids: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  if (lid.x < p.k) {
    route_ids[lid.x] = trace[p.base + lid.x];
  }
}
