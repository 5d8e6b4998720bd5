"""The reference model: load a GGUF, then `prefill(ids)` and `step(id)` with per-layer caches, returning logits.

    model = ReferenceModel("micro-qwen3moe.gguf")
    last = model.prefill(prompt_ids)          # logits after the prompt
    nxt = model.step(int(last.argmax()))      # one more token
"""
from __future__ import annotations

import numpy as np

from py_engine.models.registry import NAMES

from . import gemma4, qwen3moe, qwen35moe
from .weights import REFERENCE_ONLY
from .config import read_config
from .layers import Linear, Params, rms_norm
from .options import Options
from .weights import GGUFWeights

# the reference's module per architecture the engine runs (py_engine.models.registry, the one list), and those it
# runs before the engine does (weights.REFERENCE_ONLY)
ARCHITECTURES = {"qwen3moe": qwen3moe, "qwen35moe": qwen35moe, "gemma4": gemma4}
assert set(ARCHITECTURES) == set(NAMES) | set(REFERENCE_ONLY), "the reference needs a module for each architecture"


class ReferenceModel:
    def __init__(self, source, options: Options | None = None):
        """source: a GGUF path, or an open GGUFWeights (to share one file between several option sets)."""
        self.options = options or Options()
        self.weights = source if isinstance(source, GGUFWeights) else GGUFWeights(source)
        self.config = read_config(self.weights)
        arch = ARCHITECTURES[self.config.arch]
        params = Params(self.weights, self.options)
        # the embedding is a row lookup (ggml_get_rows): dequantised, never activation-quantised
        self.token_embd = params.matrix("token_embd.weight")
        self.blocks = [arch.Block(params, self.config, i) for i in range(self.config.n_layer)]
        self.output_norm = params.vector("output_norm.weight")
        # no output.weight: the output head is tied to the embedding (llama.cpp TENSOR_DUPLICATED)
        self.output = params.linear("output.weight") if params.has("output.weight") else \
            params.linear("token_embd.weight")
        self.eps = self.config.rms_eps * self.options.rms_eps_scale
        # gemma4: the embedding is scaled by sqrt(hidden), the logits soft-capped (neither for the qwen models)
        self.embedding_scale = getattr(self.config, "embd_scale", 1.0)
        self.softcap = getattr(self.config, "f_final_logit_softcapping", 0.0)
        self.reset()

    def reset(self):
        """Forget the sequence: empty KV caches, zero recurrent states, position 0."""
        self.states = [block.new_state() for block in self.blocks]
        self.position = 0

    def _hidden(self, ids):
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size == 0:
            raise ValueError("no token ids given")
        if ids.min() < 0 or ids.max() >= self.config.n_vocab:
            raise ValueError(f"token id out of range 0..{self.config.n_vocab - 1}: {ids.min()}..{ids.max()}")
        positions = self.position + np.arange(ids.size)
        x = self.token_embd[ids]
        if self.embedding_scale != 1.0:
            x = x * self.embedding_scale
        for block, state in zip(self.blocks, self.states):
            x = block(x, state, positions)
        self.position += ids.size
        return rms_norm(x, self.output_norm, self.eps)

    def _logits(self, h):
        logits = self.output(h)
        if self.softcap:
            logits = self.softcap * np.tanh(logits / self.softcap)
        return logits

    def prefill(self, ids, all_logits=False):
        """Feed ids as one batch after what was fed so far. Returns the logits after the last id (n_vocab,), or
        with all_logits every position's (n, n_vocab)."""
        h = self._hidden(ids)
        return self._logits(h) if all_logits else self._logits(h[-1:])[0]

    def step(self, token_id):
        """Feed one id; returns the logits of the next position (n_vocab,)."""
        return self._logits(self._hidden([int(token_id)]))[0]

    def teacher_forced(self, prompt_ids, forced_ids):
        """From an empty state: prefill the prompt in one batch, then feed forced_ids one at a time. Returns
        len(forced_ids) + 1 logits vectors: step s scores the token after prompt_ids + forced_ids[:s]."""
        self.reset()
        rows = [self.prefill(prompt_ids)]
        for token in forced_ids:
            rows.append(self.step(token))
        return np.stack(rows)

    def greedy(self, prompt_ids, n_steps):
        """From an empty state: n_steps greedy steps (argmax, ties to the lower id). Returns (ids, logits rows)."""
        self.reset()
        logits = self.prefill(prompt_ids)
        ids, rows = [], []
        for s in range(n_steps):
            rows.append(logits)
            ids.append(int(np.argmax(logits)))
            if s + 1 < n_steps:
                logits = self.step(ids[-1])
        return ids, np.stack(rows)
