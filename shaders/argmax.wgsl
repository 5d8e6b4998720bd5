// Index of the largest of n values (ties to the lower index): greedy decoding without reading the logits back.
struct Params { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

var<workgroup> val: array<f32, 256>;
var<workgroup> idx: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  for (var i = t; i < p.n; i += 256u) {
    let v = x[i];
    if (v > bv || bi == 0xffffffffu) {   // strided scan visits indices in increasing order: '>' keeps the lower
      bv = v;
      bi = i;
    }
  }
  val[t] = bv;
  idx[t] = bi;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (t < s) {
      let b = val[t + s];
      let a = val[t];
      if (idx[t + s] != 0xffffffffu && (idx[t] == 0xffffffffu || b > a || (b == a && idx[t + s] < idx[t]))) {
        val[t] = b;
        idx[t] = idx[t + s];
      }
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    out[0] = idx[0];
  }
}
