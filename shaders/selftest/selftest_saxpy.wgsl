// Boot self-test kernel: y = a * x + y over n floats, then each workgroup sums its 256 outputs into one partial.
//
// It exercises what every engine kernel relies on: a uniform block, read-only and read-write storage buffers,
// workgroup memory and workgroupBarrier. The boot check (py_engine/boot.py) feeds values whose sums stay exactly
// representable in f32 (half-integers below 2^22), so the result is compared bit for bit, whatever the summation
// order or FMA contraction the device uses.

const WG: u32 = 256u;

struct Params {
    a: f32,
    n: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> partial_sums: array<f32>;

var<workgroup> scratch: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let i = gid.x;
    var v = 0.0;
    if (i < params.n) {
        v = params.a * x[i] + y[i];
        y[i] = v;
    }
    scratch[lid] = v;
    workgroupBarrier();
    // Tree reduction: halve the active range each step; every invocation reaches every barrier.
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (lid < stride) {
            scratch[lid] = scratch[lid] + scratch[lid + stride];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        partial_sums[wid.x] = scratch[0];
    }
}
