// The input of the prefill chunk's Q8_0 GEMMs, rounded the way the decode kernels (x_stage_q8.wgsl) and llama.cpp's
// CPU backend (ggml quantize_row_q8_0, which made the fixtures) quantise a Q8_0 matrix's activations, so that
// prefill and decode compute the same products: per 32 values amax = max|x|, d = f16(amax / 127),
// q = round-half-even(x · (127 / amax)) in f32 (0 when amax = 0), and y = q · d (exact in f32). A GEMM of the
// dequantised weights with y is the int8 form Σ_blocks (d_w · d_x) · Σ q_w q_x up to f32 rounding.
// One lane per 32-value block of the chunk's used rows: row r < chunk.n · row_mult (the routed experts' activations
// hold k rows per token) reads x[r · x_stride + x_base ..] and writes y[r · y_stride + y_base ..]. Workgroups are
// counted flat (x + y · num_workgroups.x): a chunk's rows times blocks may pass 65535 groups in one dimension.
#include "chunk.wgsl"
struct Params { nb: u32, row_mult: u32, x_base: u32, x_stride: u32, y_base: u32, y_stride: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> chunk: Chunk;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

#include "round_f16.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = (wg.y * nwg.x + wg.x) * 64u + lid.x;
  if (i >= chunk.n * p.row_mult * p.nb) {
    return;
  }
  let r = i / p.nb;
  let b = i % p.nb;
  let xo = r * p.x_stride + p.x_base + 32u * b;
  var v: array<f32, 32>;
  var amax = 0.0;
  for (var j = 0u; j < 32u; j++) {
    v[j] = x[xo + j];
    amax = max(amax, abs(v[j]));
  }
  var inv = 0.0;
  if (amax > 0.0) {
    inv = 127.0 / amax;
  }
  let d = round_to_f16(amax / 127.0);
  let yo = r * p.y_stride + p.y_base + 32u * b;
  for (var j = 0u; j < 32u; j++) {
    y[yo + j] = round(v[j] * inv) * d;
  }
}
