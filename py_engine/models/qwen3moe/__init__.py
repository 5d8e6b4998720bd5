"""qwen3moe (Qwen3-30B-A3B), after llama.cpp src/models/qwen3moe.cpp:
    x = token_embd[token]
    per layer: h = x + attn(attn_norm(x)); x = h + moe(ffn_norm(h))      (attn: q/k RMSNorm per head, NeoX RoPE)
    logits = output(output_norm(x))
No shared expert; top-k weights are always renormalised. config.py is pure Python; model.py, decode.py and
prefill.py record WebGPU dispatches (imported on demand: models/registry.py)."""
