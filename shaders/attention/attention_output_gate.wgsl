// qwen35moe gated attention output: attn[h·hd + d] *= sigmoid(gate[h][d]), the gate read in place from the q
// projection's output, whose head h holds [query (hd) | gate (hd)] (llama.cpp: cur = cur * sigmoid(gate) before
// attn_output).
struct Params { n_head: u32, hd: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qg: array<f32>;
@group(0) @binding(2) var<storage, read_write> attn: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n_head * p.hd) {
    return;
  }
  let h = i / p.hd;
  let g = qg[h * 2u * p.hd + p.hd + (i - h * p.hd)];
  attn[i] = attn[i] / (1.0 + exp(-g));
}
