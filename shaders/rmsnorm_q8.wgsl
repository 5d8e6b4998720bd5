// RMSNorm of one row of n values (rmsnorm.wgsl's y, the same bits: rms_scale64.wgsl), and y quantised per 32-block
// as a Q8_0 product quantises its input (q8_block.wgsl) into xq: 2 vec4 of codes per block, then the nb scales
// (f32 bits). The product after it reads xq as is (x_stage_q8pre.wgsl) instead of every one of its workgroups
// quantising y again. One workgroup of 64; n % 32 == 0; x_base and y_base in vec4s.
struct Params { n: u32, eps: f32, x_base: u32, y_base: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> xq: array<vec4<u32>>;

#include "rms_scale64.wgsl"
#include "q8_block.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let inv = rms_scale64(t, p.x_base, p.n, p.eps);
  let nb = p.n / 32u;
  for (var b = t; b < nb; b += 64u) {
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
      v[i] = x[p.x_base + b * 8u + i] * inv * w[b * 8u + i];
      y[p.y_base + b * 8u + i] = v[i];
    }
    let q = q8_block(v);
    xq[2u * b] = vec4<u32>(q.codes[0], q.codes[1], q.codes[2], q.codes[3]);
    xq[2u * b + 1u] = vec4<u32>(q.codes[4], q.codes[5], q.codes[6], q.codes[7]);
    xq[2u * nb + b / 4u][b % 4u] = bitcast<u32>(q.d);
  }
}
