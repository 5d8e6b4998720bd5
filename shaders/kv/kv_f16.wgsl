// KV cache words holding two f16 values (no shader-f16 needed).
alias KvWord = u32;
fn kv_pack(v: vec2<f32>) -> KvWord { return pack2x16float(v); }
fn kv_unpack(w: KvWord) -> vec2<f32> { return unpack2x16float(w); }
