"""The generation layer's Backend (py_engine/generation/backend.py) over the GPU decoder.

The decoder reads back the whole logits row of the last token of every step and the k best candidates are picked
here in Python, except for plain greedy decoding announced by the generator (expect_candidates(1)): then only the
GPU's argmax and its logit come back (Decoder.step_argmax, 8 bytes instead of 1 MB at a 248k vocabulary, and no
Python pass over the row). A prompt is prefilled in one go: every token but the last is
enqueued without a readback (`Decoder.feed`), the last one is stepped and its logits kept for next_candidates().

Greedy decoding on a decoder that chains (Decoder.launch_argmax): each greedy step queues the next one at once,
fed on the GPU with its own argmax, before its result is read back; the CPU encodes step k + 1 while the GPU runs
step k. The generator's next prefill([that argmax]) then finds its step already running. A queued step the caller
does not take (the generation ended) is settled: settle(token) says whether it fed the caller's token (the state
then holds it); otherwise an attention-only model rolls its position back and a recurrent one reports the extra
token in n_cached, so the generator starts over.

truncate() is exact for attention-only models (qwen3moe): the KV rows past the new length are simply overwritten
when positions are fed again, and attention only reads positions below the current one. A model with recurrent
layers (qwen35moe's Gated DeltaNet) folds every token into its state, so it cannot roll back; it keeps copies of
its state at the turn boundaries the generator names instead (save_checkpoint / restore_checkpoint,
checkpoints.py), and a prompt that diverges resumes from the longest one at or before the shared prefix.
"""
import heapq

from ..models.registry import architecture

MAX_CANDIDATES = 64


class GpuBackend:
    def __init__(self, decoder, max_candidates: int = MAX_CANDIDATES):
        self.decoder = decoder
        self.arch = decoder.model.arch
        self.max_candidates = int(max_candidates)
        # the whole state is the KV cache (no recurrent layers): a shorter prefix is just a smaller position
        self.supports_truncate = architecture(self.arch).attention_only
        self._logits = None  # the row after the last prefilled token (array('f')), None when nothing is pending
        self._best = None  # (id, logit) instead of the row, after a greedy prefill
        self._k = None  # candidates the generator will ask for (expect_candidates), None: unknown
        self._queued = None  # (token it feeds, handle): a greedy step launched behind the last one
        self._stale = None  # the handle of a queued step dropped by reset/truncate, read back before the next one
        self.queued_taken = 0  # queued steps whose token the caller then fed (decode_step or settle)

    # --- sizes --------------------------------------------------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        return self.decoder.cache.n_ctx

    @property
    def vocab_size(self) -> int:
        return self.decoder.n_vocab

    @property
    def state_checkpoints(self) -> int:
        """Copies of the recurrent state the decoder keeps (0: none; an attention-only model truncates instead)."""
        cps = self.decoder.checkpoints
        return cps.count if cps is not None else 0

    @property
    def n_cached(self) -> int:
        return self.decoder.pos - (self._queued is not None)  # a queued step's token is not the caller's yet

    # --- the protocol -------------------------------------------------------------------------------------------
    async def prefill(self, ids, start_pos: int) -> None:
        await self._prefill(ids, start_pos, queue=False)

    async def decode_step(self, token: int, start_pos: int) -> None:
        """prefill([token]) for a token the generator decoded (optional protocol method): a greedy step then also
        queues the next one (see the module docstring). Prompt parts go through prefill(), which never queues:
        the next part's first token is not the argmax."""
        await self._prefill([token], start_pos, queue=True)

    async def _prefill(self, ids, start_pos: int, queue: bool) -> None:
        ids = [int(i) for i in ids]
        if not ids:
            raise ValueError("prefill needs at least one token")
        await self._collect_stale()
        self._logits = self._best = None
        queued, self._queued = self._queued, None
        if queued is not None:
            token, handle = queued
            if self._k == 1 and ids == [token] and start_pos == handle.pos:
                # the step queued behind the last one fed exactly this token here: queue the next, read this one
                self.queued_taken += 1
                self._best = await (self._collect_and_queue(handle) if queue else
                                    self.decoder.collect_argmax(handle))
                return
            await self.decoder.collect_argmax(handle)
            self._drop(handle)
        if start_pos != self.decoder.pos:
            raise ValueError(f"prefill at position {start_pos}, but the GPU state holds {self.decoder.pos} tokens")
        # the prompt (or one decode token) fed, its last token's result read: the greedy id or the logits row
        dec = self.decoder
        if self._k == 1 and queue and dec.chains:
            self._best = await self._collect_and_queue(dec.launch_prompt_argmax(ids))
        elif self._k == 1:
            self._best = await dec.step_prompt_argmax(ids)
        else:
            self._logits = await dec.step_prompt(ids)

    async def _collect_and_queue(self, handle) -> tuple:
        """Queue the step fed with `handle`'s argmax (while there is context left), then read `handle` back."""
        dec = self.decoder
        after = dec.launch_argmax(None) if dec.pos < dec.cache.n_ctx else None
        try:
            best = await dec.collect_argmax(handle)
        except BaseException:
            self._stale = after
            raise
        if after is not None:
            self._queued = (int(best[0]), after)
        return best

    async def settle(self, token=None) -> bool:
        """The generation ended with `token` picked but not fed (None: nothing picked since the last prefill).
        Reads back the step queued behind the last one; True when it fed `token` (the state now holds it, the
        caller counts it as fed)."""
        queued, self._queued = self._queued, None
        if queued is None:
            return False
        queued_token, handle = queued
        await self.decoder.collect_argmax(handle)
        if token is not None and int(token) == queued_token:
            self.queued_taken += 1
            return True
        self._drop(handle)
        return False

    def _drop(self, handle):
        """A queued step the caller did not take: an attention-only model forgets its position (its KV row is
        overwritten later); a recurrent one keeps it (n_cached tells the caller, who starts over)."""
        if self.supports_truncate:
            self.decoder.pos = handle.pos

    async def _collect_stale(self):
        if self._stale is not None:
            stale, self._stale = self._stale, None
            await self.decoder.collect_argmax(stale)

    def _forget_queued(self):
        if self._queued is not None:
            self._stale = self._queued[1]  # still running: read back (and ignored) before the next step
            self._queued = None

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
        if not 0 <= n_tokens <= self.n_cached:
            raise ValueError(f"truncate to {n_tokens} tokens, but the GPU state holds {self.n_cached}")
        self._forget_queued()
        self.decoder.pos = n_tokens
        self._logits = self._best = None

    async def prefill_checkpoint(self, ids, start_pos: int) -> None:
        """prefill(ids) without the logits of its last token, then save_checkpoint() (optional protocol method): the
        part of a prompt that ends at a checkpoint needs no readback and no separate last step. A store decoder that
        routes through the CPU (or reads embedding rows on demand) runs fed tokens only at its next step: that one
        steps as prefill does."""
        ids = [int(i) for i in ids]
        if getattr(self.decoder, "feeds_at_step", False) or self._queued is not None or len(ids) < 2:
            await self.prefill(ids, start_pos)
        else:
            await self._collect_stale()
            if start_pos != self.decoder.pos:
                raise ValueError(f"prefill at position {start_pos}, but the GPU state holds {self.decoder.pos} tokens")
            self._logits = self._best = None
            self.decoder.feed(ids)
        self.save_checkpoint()

    def save_checkpoint(self) -> None:
        """Keep the state as it is (n_cached tokens) for a later restore_checkpoint; called after a prefill, when no
        step is queued."""
        if self._queued is not None:
            raise RuntimeError("a checkpoint after a queued step: settle() it first")
        self.decoder.save_checkpoint()

    def restore_checkpoint(self, at_most: int) -> int:
        """Go back to the longest kept state of at most `at_most` tokens; returns its token count (0: none was kept,
        the state is reset)."""
        self._forget_queued()
        self._logits = self._best = None
        return self.decoder.restore_checkpoint(min(int(at_most), self.decoder.pos))

    def reset(self) -> None:
        self._forget_queued()
        self.decoder.reset()
        self._logits = self._best = None

    # --- for the page's meter -----------------------------------------------------------------------------------
    def gpu_bytes(self) -> int:
        plan = getattr(self.decoder, "plan", None)  # the store engine's budget split (expert pool included)
        if plan is not None:
            return int(plan.total)
        s = self.decoder.stats
        return int(s.get("weights_bytes", 0) + s.get("kv_bytes", 0) + s.get("activation_bytes", 0))
