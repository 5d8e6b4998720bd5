"""NumPy reference model of qwen3moe, qwen35moe and gemma4: the oracle the GPU engine is compared with.

`model.ReferenceModel` loads a GGUF and scores tokens; `protocol` holds the fixtures' comparison protocol and does
not depend on the reference model, so engine tests reuse it.
"""
