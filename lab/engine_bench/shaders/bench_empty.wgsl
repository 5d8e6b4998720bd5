// The benchmark's stand-in for a kernel (lab/engine_bench/kernel_costs.py): launched with a kernel's grid, it does
// no work. Every stand-in binds the same read_write buffer, so Dawn keeps a barrier between consecutive ones as it
// does between the engine's dependent dispatches; the store never happens (no grid is that wide).

@group(0) @binding(0) var<storage, read_write> sink: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {
    if (wg.x == 0xffffffffu) {
        sink[0] = wg.y;
    }
}
