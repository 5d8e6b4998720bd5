"""qwen35moe (Qwen3.5 / Qwen3.6-35B-A3B), after llama.cpp src/models/qwen35moe.cpp (and delta-net-base.cpp for the
recurrence):
    x = token_embd[token]
    per layer: h = x + mixer(attn_norm(x)); x = h + moe(post_attention_norm(h)) + sigmoid(w·xn)·shared(xn)
      mixer = Gated DeltaNet on recurrent layers (build_layer_attn_linear), gated full attention on the others
      (build_layer_attn)
    logits = output(output_norm(x))
Norm weights already hold the +1. Full attention: per head the q projection yields [query | gate]; q/k RMSNorm,
NeoX RoPE on the first n_rot dims, output × sigmoid(gate). Gated DeltaNet: see shaders/gdn_*.wgsl. config.py is
pure Python; model.py, decode.py and prefill.py record WebGPU dispatches (imported on demand: models/registry.py)."""
