// The routed experts of a gate/up product read as given (router_topk.wgsl ran before; or the stand-in of a dense
// pair). Same interface as router_pick_topk.wgsl.
@group(0) @binding(5) var<storage, read> route_ids: array<u32>;

const ROUTE_WRITER: bool = false;   // no writer workgroup: the ids are given

fn routed_expert(kk: u32, t: u32) -> u32 {
  return route_ids[kk];
}

fn write_route(t: u32) {}
