"""One module per architecture, holding only its math: qwen3moe, qwen35moe."""
