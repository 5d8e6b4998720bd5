"""Early-stop routing for a partial expert pool: one submit per token, a sync only where an expert is missing.

The recorded token is kept whole, but every dispatch after layer 0's residency check is issued *indirectly*
(except the later checks, which return at once once the token has stopped), its workgroup counts read from an
`args` buffer. A residency check that finds an absent expert zeroes the counts
of every dispatch after it (shaders/moe_residency.wgsl) and notes its layer in `status`, so the rest of the
token does not run. The CPU reads the result (status, the token's routed ids, the logits) in one readback; if
the token stopped at layer L it pages L's experts in and resubmits from L's check: the layers before L (their
KV appends, a DeltaNet state update) ran once and are never repeated. Each submit first restores `args` from a
pristine copy and clears the stop flag.

So a token costs 1 + (number of layers that missed) syncs; with every picked expert resident it costs one (the
logits readback, which also brings the routed ids the LRU/hot policy is told about).
"""
import struct

import js

from ..gpu.buffers import COPY_DST, COPY_SRC, INDIRECT, MAP_READ, STORAGE, create_buffer, write_buffer
from ..gpu.jsutil import load_program

_helper = None


def helper():
    global _helper
    if _helper is None:
        _helper = load_program("early_stop.js")
    return _helper


STATUS_AT, IDS_AT = 0, 16  # byte offsets inside the readback staging buffer


class GuardedToken:
    """The token's dispatch list converted for early stops, and one token's run with its resumes."""

    def __init__(self, gpu, kern, dl, pool, logits_buf, n_vocab, lookahead=None):
        self.gpu, self.pool, self.kern = gpu, pool, kern
        self.lookahead = lookahead
        splits = kern.splits
        self.g0 = splits[0][1]
        self.n_guarded = dl.count - self.g0
        self.layers = [s[0] for s in splits]
        self.k = splits[0][3]
        if any(s[3] != self.k for s in splits) or any(s[2] is not splits[0][2] for s in splits):
            raise ValueError("early-stop routing needs every MoE layer to route top-k into the same ids buffer")
        nbytes = self.args_bytes = 12 * self.n_guarded
        self.args = create_buffer(gpu, nbytes, STORAGE | INDIRECT | COPY_DST, "guard_args")
        self.pristine = create_buffer(gpu, nbytes, STORAGE | COPY_SRC | COPY_DST, "guard_args_pristine")
        self.zeros = create_buffer(gpu, 16, STORAGE | COPY_SRC | COPY_DST, "zeros")
        kern.finish(dl, self.args)  # the checks, now bound to the args they zero
        counts, ops = [], dl.ops
        prologue = [js.Array.of(1, self.pristine, 0, self.args, 0, nbytes),
                    js.Array.of(1, self.zeros, 0, pool.status, 4, 4)]  # clear the stop flag, keep the count
        head = list(prologue)
        guarded = []
        checks = {s[1] for s in splits}
        for j in range(dl.count):
            op = ops[j]
            if j < self.g0:
                head.append(op)
                continue
            counts += [int(op[3]), int(op[4]), int(op[5])]
            # the checks stay direct (they write `args`; a stopped check returns at once, see the shader)
            guarded.append(op if j in checks else js.Array.of(2, op[1], op[2], self.args, 12 * (j - self.g0)))
        write_buffer(gpu, self.pristine, 0, struct.pack(f"<{len(counts)}I", *counts))
        write_buffer(gpu, self.zeros, 0, bytes(16))
        self.whole = js.Array.of(*(head + guarded))
        # resuming at layer L's check: the prologue, then everything from that check on
        self.resume = {}
        for layer, index, _, _ in splits:
            self.resume[layer] = js.Array.of(*(prologue + guarded[index - self.g0:]))
        # readback layout: status words at 0, the token's routed ids (layer-major) at 16, the router look-ahead's
        # guesses (lookahead.py) right after, logits 256-aligned after that
        n_layers = len(splits)
        hist = 4 * self.k * n_layers
        self.lookahead_at = IDS_AT + hist
        copies = [js.Array.of(pool.status, 0, STATUS_AT, 8), js.Array.of(pool.route_hist, 0, IDS_AT, hist)]
        la_bytes = 0
        if lookahead is not None:
            la_copies, la_bytes = lookahead.copies(self.layers, self.lookahead_at)
            copies += [js.Array.of(*c) for c in la_copies]
        self.small_bytes = self.lookahead_at + la_bytes
        self.logits_at = (self.small_bytes + 255) // 256 * 256
        self.staging = create_buffer(gpu, self.logits_at + 4 * n_vocab, MAP_READ | COPY_DST, "token_readback")
        self.copies_small = js.Array.of(*copies)
        self.copies_logits = js.Array.of(*self.copies_small,
                                         js.Array.of(logits_buf, 0, self.logits_at, 4 * n_vocab))
        self.logits_bytes = self.logits_at + 4 * n_vocab
        self.gpu_bytes = 2 * nbytes + 16 + self.logits_bytes

    async def run(self, step_buf, words, want_logits, stats, prefetch_next=None):
        """One token; returns the readback bytes (status, routed ids, look-ahead guesses, logits when wanted).
        `prefetch_next(layer, raw)`, on a stop at `layer` right after its demand is claimed: queue guesses for the
        next layers; it may return an awaitable, awaited with the demand before the resume (prefetch_wait)."""
        h, dev, streamer = helper(), self.gpu.device, self.pool.streamer
        copies, nbytes = ((self.copies_logits, self.logits_bytes) if want_logits
                          else (self.copies_small, self.small_bytes))
        raw = (await h.run(dev, step_buf, words, self.whole, copies, self.staging, nbytes)).to_bytes()
        stats["syncs"] += 1
        demanded = set()
        while True:
            stop = struct.unpack_from("<I", raw, STATUS_AT + 4)[0]
            if stop == 0:
                break
            layer = stop - 1
            ids = struct.unpack_from(f"<{self.k}I", raw, IDS_AT + 4 * self.k * self.layers.index(layer))
            if layer in demanded:
                raise RuntimeError(f"layer {layer} stopped again after its experts were paged in")
            demanded.add(layer)
            pending_slots = streamer.ensure(layer, ids)
            also = prefetch_next(layer, raw) if prefetch_next is not None else None
            slots = await pending_slots
            if also is not None:
                await also
            self.pool.flush_map()
            pending = h.run(dev, step_buf, words, self.resume[layer], copies, self.staging, nbytes)
            streamer.release(set(slots))  # the submit that reads them is queued; later uploads come after it
            raw = (await pending).to_bytes()
            stats["syncs"] += 1
            stats["resumes"] = stats.get("resumes", 0) + 1
        # the layers routed entirely on the GPU: their picks were resident; tell the eviction policy
        for li, layer in enumerate(self.layers):
            if layer not in demanded:
                streamer.touch(layer, struct.unpack_from(f"<{self.k}I", raw, IDS_AT + 4 * self.k * li))
        streamer.advance_token()
        return raw

    def routed_ids(self, raw, i):
        """The ids the i-th MoE layer routed to in this readback."""
        return struct.unpack_from(f"<{self.k}I", raw, IDS_AT + 4 * self.k * i)

    def lookahead_ids(self, raw, layer) -> dict:
        """{target layer: guessed ids} the look-ahead computed at `layer` in this readback ({} without one)."""
        if self.lookahead is None:
            return {}
        return self.lookahead.unpack(raw, self.layers, self.lookahead_at, only={layer}).get(layer, {})

    def logits(self, raw) -> bytes:
        return raw[self.logits_at:self.logits_bytes]

    def release(self):
        for b in (self.args, self.pristine, self.zeros, self.staging):
            b.destroy()
