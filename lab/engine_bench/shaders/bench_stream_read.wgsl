// The benchmark's bandwidth bound: a plain streaming read of one large buffer, 16 bytes per load.
//
// Thread t reads the vec4 words t, t + STRIDE, t + 2*STRIDE, ... (PER of them): consecutive threads read
// consecutive words, so every load is fully coalesced and each byte is read exactly once per dispatch. The XOR
// of what a thread read is stored only if it equals a value random data practically never gives, so the loads
// cannot be optimised away while the kernel writes (almost) nothing. No engine kernel can read weights faster
// than this one on the same device: decode speed is compared against it.
//
// Constants: WGS (workgroup size), PER (words per thread), N4 (vec4 words in the buffer), STRIDE (threads that
// read: ceil(N4 / PER)). Dispatched as (x, y) groups when more than 65535 are needed.

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;

const N4: u32 = {{N4}}u;
const STRIDE: u32 = {{STRIDE}}u;
const PER: u32 = {{PER}}u;

@compute @workgroup_size({{WGS}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = gid.y * groups.x * {{WGS}}u + gid.x;
    if (t >= STRIDE) {
        return;
    }
    var acc = vec4<u32>(0u);
    for (var i = 0u; i < PER; i++) {
        let k = t + i * STRIDE;
        if (k < N4) {
            acc ^= src[k];
        }
    }
    if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) {
        sink[t & 0xffffu] = acc.z ^ acc.w;
    }
}
