"""The NumPy reference model as a generation backend (py_engine/generation/backend.py), for tests and host tools.

    backend = ReferenceBackend.from_gguf(path)            # or ReferenceBackend(ReferenceModel(...), n_ctx=...)
    gen = Generator(backend, backend.tokenizer, backend.arch)

qwen3moe and gemma4 (attention only) can truncate: the KV caches drop their tail rows. qwen35moe has Gated DeltaNet
layers whose state cannot be rolled back, so it reports supports_truncate = False and keeps copies of its states at
the turn boundaries the generator names (save_checkpoint / restore_checkpoint, as the GPU engine does; none with
state_checkpoints=0, and the generator then resets it). It also counts its prefill calls and tokens, which the tests
use to check prefix reuse.
"""
from __future__ import annotations

import copy

import numpy as np

from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import Tokenizer

from .cache import KVCache
from .model import ReferenceModel
from .options import Options


class ReferenceBackend:
    def __init__(self, model: ReferenceModel, n_ctx: int | None = None, max_candidates: int | None = None,
                 tokenizer: Tokenizer | None = None, state_checkpoints: int = 4):
        cfg = model.config
        trained = cfg.n_ctx_train
        self.model = model
        self.arch = cfg.arch
        self.n_ctx = int(n_ctx if n_ctx is not None else (trained or 4096))
        if self.n_ctx < 1:
            raise ValueError(f"n_ctx must be >= 1, got {self.n_ctx}")
        self.vocab_size = cfg.n_vocab
        # the whole row is at hand here, so serve any width (sampling over the full vocabulary is then exact)
        self.max_candidates = int(max_candidates if max_candidates is not None else cfg.n_vocab)
        # no recurrent layer: the KV caches can drop their tail rows (gemma4 too, which the registry does not list yet)
        self.supports_truncate = not any(cfg.recurrent)
        self.tokenizer = tokenizer
        self._logits = None
        self.prefill_calls = []  # (start_pos, n_tokens) of every prefill, for tests and tools
        self.resets = 0
        # a recurrent model's kept states: token count -> the layers' states (oldest first)
        self.state_checkpoints = 0 if self.supports_truncate else int(state_checkpoints)
        self._checkpoints = {}

    @classmethod
    def from_gguf(cls, path, options: Options | None = None, **kwargs) -> "ReferenceBackend":
        """Model and tokenizer from one GGUF file (float32 by default, like an engine)."""
        model = ReferenceModel(path, options or Options(dtype=np.float32))
        tokenizer = Tokenizer.from_gguf_metadata(read_gguf_file(path).metadata)
        return cls(model, tokenizer=tokenizer, **kwargs)

    @property
    def n_cached(self) -> int:
        return self.model.position

    @property
    def prefilled_tokens(self) -> int:
        return sum(n for _, n in self.prefill_calls)

    async def prefill(self, ids, start_pos: int) -> None:
        ids = [int(i) for i in ids]
        if not ids:
            raise ValueError("prefill: no token ids given")
        if start_pos != self.model.position:
            raise ValueError(f"prefill at position {start_pos}, but the cache holds {self.model.position} tokens")
        if start_pos + len(ids) > self.n_ctx:
            raise ValueError(f"prefill of {len(ids)} tokens at {start_pos} overflows the context of {self.n_ctx}")
        self._logits = self.model.prefill(ids)
        self.prefill_calls.append((start_pos, len(ids)))

    async def next_candidates(self, k: int):
        if self._logits is None:
            raise RuntimeError("next_candidates before any prefill: there are no logits yet")
        if k < 1:
            raise ValueError(f"next_candidates: k must be >= 1, got {k}")
        row = self._logits
        k = min(int(k), row.size, self.max_candidates)
        if k == 1:
            top = np.array([int(np.argmax(row))])
        elif k < row.size:
            top = np.argpartition(-row, k - 1)[:k]
        else:
            top = np.arange(row.size)
        # highest first, ties to the lower id (numpy argmax's choice, and llama.cpp's greedy pick in the refs)
        order = sorted(top.tolist(), key=lambda i: (-float(row[i]), i))
        return order, [float(row[i]) for i in order]

    def truncate(self, n_tokens: int) -> None:
        if not self.supports_truncate:
            raise RuntimeError(f"{self.arch}: recurrent layers cannot be rolled back; reset() instead")
        if not 0 <= n_tokens <= self.model.position:
            raise ValueError(f"truncate to {n_tokens} tokens, but the cache holds {self.model.position}")
        for state in self.model.states:
            if not isinstance(state, KVCache):
                raise RuntimeError(f"cannot truncate a {type(state).__name__}")
            state.k, state.v = state.k[:n_tokens], state.v[:n_tokens]
        self.model.position = n_tokens
        self._logits = None  # the logits of position n_tokens - 1 are gone; the next prefill brings new ones

    def save_checkpoint(self) -> None:
        n = self.model.position
        self._checkpoints.pop(n, None)
        if self.state_checkpoints and len(self._checkpoints) >= self.state_checkpoints:
            del self._checkpoints[next(iter(self._checkpoints))]
        if self.state_checkpoints:
            self._checkpoints[n] = copy.deepcopy(self.model.states)

    def restore_checkpoint(self, at_most: int) -> int:
        best = max((n for n in self._checkpoints if n <= at_most), default=0)
        self._checkpoints = {n: s for n, s in self._checkpoints.items() if n <= best}
        if not best:
            self.reset()
            return 0
        self.model.states = copy.deepcopy(self._checkpoints[best])
        self.model.position = best
        self._logits = None
        return best

    def reset(self) -> None:
        self.model.reset()
        self._logits = None
        self._checkpoints = {}
        self.resets += 1
