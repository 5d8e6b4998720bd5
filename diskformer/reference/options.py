"""How the reference model computes: precision, emulations, and deliberately broken variants for tests.

The broken variants exist to prove that the comparison protocol can fail: a test runs the model with one of them
switched and asserts the protocol rejects it. They default to the correct behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Options:
    dtype: type = np.float64  # compute (and weight) precision: np.float64 or np.float32
    q8_activations: bool = False  # emulate ggml's Q8_0 quantisation of the input of every Q8_0 product
    kv_f16: bool = False  # round K and V to float16 when they enter the cache (an f16 KV cache)
    gelu_fp16_table: bool = False  # gemma4: GELU through ggml-cpu's fp16 table instead of exactly
    # deliberate errors (tests only) -------------------------------------------------------------------------------
    renormalize_experts: bool = True  # False: top-k expert weights are not renormalised
    attention_output_gate: bool = True  # False: qwen35moe full attention skips its sigmoid output gate
    gdn_tiled_heads: bool = True  # False: GDN value head h uses key head h // (nv/nk) instead of h % nk
    rms_eps_scale: float = 1.0  # e.g. 10: RMSNorm epsilon x10
    rope_base_scale: float = 1.0  # e.g. 0.1: rope freq_base / 10

    def __post_init__(self):
        if self.dtype not in (np.float64, np.float32):
            raise ValueError(f"dtype must be numpy.float64 or numpy.float32, not {self.dtype!r}")

    @property
    def is_broken(self) -> bool:
        return (not self.renormalize_experts or not self.attention_output_gate or not self.gdn_tiled_heads
                or self.rms_eps_scale != 1.0 or self.rope_base_scale != 1.0)
