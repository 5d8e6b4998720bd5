// qwen35moe full attention: the q projection yields, per head, [query (hd) | gate (hd)] (llama.cpp views Qcur_full
// with a head stride of 2·hd). Copy the queries into a contiguous [n_head][hd] buffer for norm, RoPE and
// attention; the gates stay in place for attention_output_gate.wgsl.
struct Params { n_head: u32, hd: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qg: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n_head * p.hd) {
    return;
  }
  let h = i / p.hd;
  q[i] = qg[h * 2u * p.hd + (i - h * p.hd)];
}
