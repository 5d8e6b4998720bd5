// KV cache words holding two f32 values (the exact cache, for comparisons at llama.cpp's -ctk f32 -ctv f32).
alias KvWord = vec2<f32>;
fn kv_pack(v: vec2<f32>) -> KvWord { return v; }
fn kv_unpack(w: KvWord) -> vec2<f32> { return w; }
