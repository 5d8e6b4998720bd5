"""The generation layer's Backend (py_engine/generation/backend.py) over the GPU decoder.

The decoder reads back the whole logits row of the last token of every step and the k best candidates are picked
here in Python, except for plain greedy decoding announced by the generator (expect_candidates(1)): then only the
GPU's argmax and its logit come back (Decoder.step_argmax, 8 bytes instead of 1 MB at a 248k vocabulary, and no
Python pass over the row). A prompt is prefilled in one go: every token but the last is
enqueued without a readback (`Decoder.feed`), the last one is stepped and its logits kept for next_candidates().

truncate() is exact for attention-only models (qwen3moe): the KV rows past the new length are simply overwritten
when positions are fed again, and attention only reads positions below the current one. A model with recurrent
layers (qwen35moe's Gated DeltaNet) folds every token into its state, so it cannot roll back: the generator resets
and prefills again instead.
"""
import heapq

# Architectures whose whole state is the KV cache (so a shorter prefix is just a smaller position).
ATTENTION_ONLY = frozenset({"qwen3moe"})
MAX_CANDIDATES = 64


class GpuBackend:
    def __init__(self, decoder, max_candidates: int = MAX_CANDIDATES):
        self.decoder = decoder
        self.arch = decoder.model.arch
        self.max_candidates = int(max_candidates)
        self.supports_truncate = self.arch in ATTENTION_ONLY
        self._logits = None  # the row after the last prefilled token (array('f')), None when nothing is pending
        self._best = None  # (id, logit) instead of the row, after a greedy prefill
        self._k = None  # candidates the generator will ask for (expect_candidates), None: unknown

    # --- sizes --------------------------------------------------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        return self.decoder.cache.n_ctx

    @property
    def vocab_size(self) -> int:
        return self.decoder.n_vocab

    @property
    def n_cached(self) -> int:
        return self.decoder.pos

    # --- the protocol -------------------------------------------------------------------------------------------
    async def prefill(self, ids, start_pos: int) -> None:
        ids = [int(i) for i in ids]
        if not ids:
            raise ValueError("prefill needs at least one token")
        if start_pos != self.decoder.pos:
            raise ValueError(f"prefill at position {start_pos}, but the GPU state holds {self.decoder.pos} tokens")
        self._logits = self._best = None
        self.decoder.feed(ids[:-1])
        greedy = getattr(self.decoder, "step_argmax", None)
        if self._k == 1 and greedy is not None:
            self._best = await greedy(ids[-1])
        else:
            self._logits = await self.decoder.step(ids[-1])

    def expect_candidates(self, k) -> None:
        """The generator's hint: next_candidates(k) follows every prefill until the next hint (None: unknown)."""
        self._k = None if k is None else int(k)

    async def next_candidates(self, k: int):
        if self._best is not None:
            if k != 1:
                raise RuntimeError(f"next_candidates({k}) after a greedy prefill (expect_candidates(1)): only the "
                                   "best token was read back")
            return [int(self._best[0])], [float(self._best[1])]
        logits = self._logits
        if logits is None:
            raise RuntimeError("next_candidates() before any prefill: there are no logits to pick from")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if k == 1:
            best = max(logits)
            i = logits.index(best)  # the first (lowest) id holding the maximum: llama.cpp's greedy tie rule
            return [i], [float(best)]
        # nlargest is stable for equal keys, so ties come out lowest id first
        ids = heapq.nlargest(min(k, len(logits)), range(len(logits)), key=logits.__getitem__)
        return ids, [float(logits[i]) for i in ids]

    def truncate(self, n_tokens: int) -> None:
        if not self.supports_truncate:
            raise RuntimeError(f"{self.arch} has recurrent state and cannot be truncated; reset() and prefill")
        if not 0 <= n_tokens <= self.decoder.pos:
            raise ValueError(f"truncate to {n_tokens} tokens, but the GPU state holds {self.decoder.pos}")
        self.decoder.pos = n_tokens
        self._logits = self._best = None

    def reset(self) -> None:
        self.decoder.reset()
        self._logits = self._best = None

    # --- for the page's meter -----------------------------------------------------------------------------------
    def gpu_bytes(self) -> int:
        plan = getattr(self.decoder, "plan", None)  # the store engine's budget split (expert pool included)
        if plan is not None:
            return int(plan.total)
        s = self.decoder.stats
        return int(s.get("weights_bytes", 0) + s.get("kv_bytes", 0) + s.get("activation_bytes", 0))
