"""Checkpoints of the recurrent state, kept on the GPU, so a follow-up prompt need not prefill the conversation again.

A Gated DeltaNet layer folds every token into its state (conv window + delta-rule state), which cannot be rolled
back; the KV cache of the attention layers can (rows past the new length are simply overwritten). So at a few turn
boundaries the generator asks for a copy of every state buffer (copyBufferToBuffer into checkpoint buffers, no
readback, queued behind the prefill that reached that point); a later prompt that shares at least that prefix
restores the longest checkpoint at or before the shared part, sets the position to its token count and prefills
only the rest. This is what llama.cpp's context checkpoints do for hybrid and sliding-window models.

Why it is exact: a checkpoint of n tokens holds the state after exactly those tokens, and the KV rows below n are
unchanged as long as the position never went back below n since: every rewind to m drops the checkpoints past m,
and a reset drops them all. The conv window is a ring indexed by position (slot pos % K), so a copy of the whole
ring restored at the same position reads the same inputs. A sliding-window layer whose KV cache is a ring of rows
(gemma4: model.ring_layers) overwrites the rows of old positions likewise, so its K and V caches are copied too.
"""
from ..gpu.buffers import COPY_DST, COPY_SRC, create_buffer
from ..gpu.commands import DispatchList
from ..models.cache import STATE_BUFFERS

# turn boundaries kept: the generator takes two per prompt (the last user message's start and the reply's header),
# so four cover a follow-up, a regenerated answer and an edited last message of the last two turns
DEFAULT_CHECKPOINTS = 4


def state_buffers(model) -> list:
    """(name, bytes) of the work buffers that carry recurrent state across tokens (empty: attention only)."""
    return [(name, 4 * n) for name, n in model.work_buffers() if name.startswith(STATE_BUFFERS)]


def state_sources(model, acts, cache) -> list:
    """(label, buffer, bytes) of what a checkpoint copies: the recurrent work buffers, and the K/V rings of the
    layers the model keeps as rings (model.ring_layers)."""
    out = [(name, acts[name], n) for name, n in state_buffers(model)]
    for i in getattr(model, "ring_layers", ()):
        out += [(f"cache_k.{i}", cache.k[i], int(cache.k[i].size)), (f"cache_v.{i}", cache.v[i], int(cache.v[i].size))]
    return out


def checkpoint_bytes(model, count: int) -> int:
    """GPU bytes of `count` checkpoints of `model`'s recurrent state."""
    return count * sum(n for _, n in state_buffers(model))


class StateCheckpoints:
    """`count` copies of the recurrent state, each remembering the token count it holds (None: empty)."""

    def __init__(self, gpu, model, acts, count: int, cache=None):
        self.gpu = gpu
        self.buffers = []
        self.saves, self.restores = [], []  # per slot: the recorded copies into it and back out of it
        sources = state_sources(model, acts, cache)
        for slot in range(count):
            save, restore = DispatchList(), DispatchList()
            for name, buf, nbytes in sources:
                copy = create_buffer(gpu, nbytes, COPY_SRC | COPY_DST, f"checkpoint{slot}.{name}")
                self.buffers.append(copy)
                save.copy(buf, 0, copy, 0, nbytes, f"save {name}")
                restore.copy(copy, 0, buf, 0, nbytes, f"restore {name}")
            self.saves.append(save)
            self.restores.append(restore)
        self.nbytes = count * sum(n for _, _, n in sources)
        self.held = [None] * count  # token count per slot
        self._used = [0] * count  # when each slot was last saved or restored (the oldest is replaced)
        self._clock = 0
        self.saved = self.restored = 0  # counts, for tests and the stats

    @property
    def count(self) -> int:
        return len(self.held)

    def positions(self) -> list:
        return sorted(n for n in self.held if n is not None)

    def _touch(self, slot):
        self._clock += 1
        self._used[slot] = self._clock

    def save(self, n_tokens: int) -> None:
        """Queue a copy of the state, which holds `n_tokens` tokens once the work submitted before is done."""
        if not self.held:
            return
        if n_tokens in self.held:  # the same prefix: the same state (see the module docstring)
            self._touch(self.held.index(n_tokens))
            return
        empty = [i for i, n in enumerate(self.held) if n is None]
        slot = empty[0] if empty else min(range(self.count), key=self._used.__getitem__)
        self.saves[slot].submit(self.gpu)
        self.held[slot] = n_tokens
        self._touch(slot)
        self.saved += 1

    def restore(self, at_most: int) -> int:
        """Queue the copy back of the longest checkpoint of at most `at_most` tokens; returns its token count (0: none,
        nothing restored). The checkpoints past it are dropped."""
        best = max((n for n in self.held if n is not None and n <= at_most), default=0)
        self.drop_after(best)
        if best:
            slot = self.held.index(best)
            self.restores[slot].submit(self.gpu)
            self._touch(slot)
            self.restored += 1
        return best

    def drop_after(self, n_tokens: int) -> None:
        self.held = [n if n is not None and n <= n_tokens else None for n in self.held]

    def clear(self) -> None:
        self.held = [None] * self.count

    def release(self) -> None:
        for b in self.buffers:
            b.destroy()
        self.buffers = []
