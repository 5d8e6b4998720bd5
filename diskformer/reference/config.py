"""Hyper-parameters of a GGUF the reference runs: the engine's own config classes (py_engine/models/<arch>/config.py,
pure Python), so each `{arch}.*` key is read in one place and both sides use llama.cpp's llama_hparams names
(n_layer, n_embd, n_head, n_head_kv, head_dim, n_rot, rope_base, n_expert, n_expert_used, n_ff_exp, n_ff_shexp,
ssm_d_state, ssm_n_group, ssm_dt_rank, ssm_d_inner, recurrent, rope_sections).
"""
from __future__ import annotations

from py_engine.models.registry import NAMES, config_from_header


def read_config(w):
    """`w` is a weights.GGUFWeights; the config of its architecture (py_engine.models.registry)."""
    if w.arch not in NAMES:
        raise ValueError(f"{w.path.name}: architecture {w.arch!r} is not supported (only {', '.join(NAMES)})")
    try:
        return config_from_header(w.header)
    except ValueError as exc:
        raise ValueError(f"{w.path.name}: {exc}") from None
