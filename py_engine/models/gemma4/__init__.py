"""gemma4 (Gemma 4 26B-A4B), after llama.cpp src/models/gemma4-iswa.cpp:
    x = token_embd[token] * sqrt(n_embd)
    per layer: h = x + post_attention_norm(attn(attn_norm(x)))
               out = (h + post_ffw_norm(dense MLP + routed experts)) * layer_output_scale
    logits = softcap * tanh(output(output_norm(x)) / softcap)      (output tied to token_embd)
Sliding-window and global attention layers differ in head dim, KV heads and RoPE. config.py is pure Python (the
numpy reference, diskformer/reference/gemma4.py, reads it too); model.py, decode.py and prefill.py record WebGPU
dispatches (imported on demand: models/registry.py)."""
