"""How a token runs over a partial expert pool: one runner per routing mode (store_decoder.py picks one per token),
and the prefetch guesses both make for the layers after the one being paged.

- EarlyStopRunner (early_stop.py): one submit per token; a layer whose picked experts are not all resident stops the
  token on the GPU, the CPU pages them in and resumes at that layer.
- PerLayerRunner: the token's list cut at each MoE layer's residency check; per layer the CPU reads the k routed ids
  back, `ensure`s them and submits the MoE part with the next layer's attention part.
Both return (the logits' bytes or None, whether any layer missed: how many layers did).
"""
import asyncio
import struct

import js

from ..gpu.commands import helper
from .early_stop import helper as copies_helper


class Prefetcher:
    """Prefetch guesses for layers L+1 .. L+depth once layer L's picks are known or missing: the router look-ahead's
    or, for "previous", what those layers picked for the previous token; scored at the token's end."""

    def __init__(self, dec, depth: int, guess, wait: bool):
        self.pool, self.n_layer, self.stats = dec.pool, dec.model.cfg.n_layer, dec.stats
        self.lookahead = dec.lookahead
        self.depth, self.guess, self.wait = depth, guess, wait
        self.prev_ids = {}  # layer -> the ids it picked for the last token
        self.guesses = []  # (layer, guessed ids) prefetched in the current token, scored at its end

    def after(self, layer, lookahead=None):
        """Prefetch the guesses for the layers after `layer` (the look-ahead's {target: ids}, else the previous
        token's picks). Returns the guesses for layer + 1."""
        first = None
        for nxt in range(layer + 1, min(layer + 1 + self.depth, self.n_layer)):
            guesses = lookahead.get(nxt) if lookahead is not None else self.prev_ids.get(nxt)
            if guesses:
                self.guesses.append((nxt, guesses))
                self.pool.streamer.prefetch(nxt, guesses)
                if nxt == layer + 1:
                    first = guesses
        return first

    def score(self):
        """At the end of a token (prev_ids now holds its picks): how many guessed experts the layer picked."""
        for layer, guesses in self.guesses:
            picked = set(self.prev_ids.get(layer, ()))
            self.stats["guessed"] += len(guesses)
            self.stats["guess_hits"] += sum(1 for e in guesses if e in picked)
        self.guesses.clear()


class EarlyStopRunner:
    def __init__(self, dec, guarded, prefetch: Prefetcher):
        self.dec, self.guarded, self.prefetch = dec, guarded, prefetch

    async def run(self, token, pos, want_logits):
        g, stats = self.guarded, self.dec.stats
        resumes = stats["resumes"]
        raw = await g.run(self.dec.step_buf, [token, pos, pos + 1, 0], want_logits, stats,
                          self._at_stop if self.prefetch.depth else None)
        self.prefetch.prev_ids = {layer: g.routed_ids(raw, i) for i, layer in enumerate(g.layers)}
        self.prefetch.score()
        return (g.logits(raw) if want_logits else None), stats["resumes"] - resumes

    def _at_stop(self, layer, raw):
        """Early stop at `layer`: prefetch the guesses for the next layers (the look-ahead's, in `raw`). With
        prefetch wait, a task the resume waits for: layer + 1's guessed experts loaded."""
        p = self.prefetch
        la = self.guarded.lookahead_ids(raw, layer) if p.lookahead is not None else None
        first = p.after(layer, la)
        if p.wait and first is not None:
            return asyncio.ensure_future(p.pool.streamer.wait_for(layer + 1, first))
        return None


class PerLayerRunner:
    def __init__(self, dec, prefetch: Prefetcher):
        self.dec, self.prefetch = dec, prefetch
        self._cut_segments()

    def _cut_segments(self):
        """Cut the recorded token at each layer's residency check (partial pool): segment 0 runs up to layer 0's
        router; segment i + 1 runs layer i's experts up to layer i + 1's router (or the logits). The readback of
        the segment ending at layer j's check brings j's routed ids and the look-ahead's guesses made at j."""
        dec = self.dec
        splits = dec.kern.splits
        if len(splits) != dec.model.cfg.n_layer:
            raise RuntimeError(f"recorded {len(splits)} MoE layers for a {dec.model.cfg.n_layer}-layer model")
        cuts = [s[1] for s in splits] + [dec.dl.count]
        self.segments = [dec.dl.ops.slice(0, cuts[0])]
        self.segments += [dec.dl.ops.slice(cuts[i], cuts[i + 1]) for i in range(len(splits))]
        self.segment_reads = []  # per layer: (copies into ids_staging, bytes)
        for layer, _, route_ids, k in splits:
            copies = [(route_ids, 0, 0, 4 * k)]
            if dec.lookahead is not None:
                copies += dec.lookahead.copies([layer], 4 * k)[0]
            if dec.cpu_tier is not None:  # the routing weights and the input of the experts computed on the CPU
                copies += dec.cpu_tier.copies(layer, dec.acts["route_w"], dec.acts[dec.cpu_tier.input_name],
                                              sum(c[3] for c in copies))
            self.segment_reads.append((js.Array.of(*(js.Array.of(*c) for c in copies)),
                                       sum(c[3] for c in copies)))

    async def run(self, token, pos, want_logits):
        dec, prefetch = self.dec, self.prefetch
        h, rb = helper(), copies_helper()
        dev, streamer, cpu = dec.gpu.device, dec.pool.streamer, dec.cpu_tier
        words = [token, pos, pos + 1, 0]
        splits = dec.kern.splits
        copies, nbytes = self.segment_reads[0]
        raw = await rb.run(dev, dec.step_buf, words, self.segments[0], copies, dec.ids_staging, nbytes)
        dec.stats["syncs"] += 1
        missed = 0
        for i, (layer, _, _, k) in enumerate(splits):
            data = raw.to_bytes()
            ids = struct.unpack_from(f"<{k}I", data, 0)
            prefetch.prev_ids[layer] = ids
            m0 = streamer.counters.misses[layer]
            if cpu is not None:
                cpu.begin(layer)
            pending_slots = streamer.ensure(layer, ids)
            if cpu is not None:
                cpu.claimed(data)
            missed += streamer.counters.misses[layer] != m0  # claims (and miss counts) happen in the call
            if prefetch.depth:
                la = None if dec.lookahead is None else dec.lookahead.unpack(data, [layer], 4 * k).get(layer, {})
                prefetch.after(layer, la)
            slots = await pending_slots
            if cpu is not None:
                await cpu.finish(layer, ids, slots, data)
            dec.pool.flush_map()
            seg = self.segments[i + 1]
            if i + 1 < len(splits):
                copies, nbytes = self.segment_reads[i + 1]
                pending = rb.run(dev, dec.step_buf, words, seg, copies, dec.ids_staging, nbytes)
            elif want_logits:
                pending = h.step(dev, dec.step_buf, words, seg, dec.acts["logits"], 0, dec.staging, 4 * dec.n_vocab)
            else:
                h.replay(dev, seg)
                pending = None
            streamer.release(set(slots))  # the submit that reads them is queued; later uploads come after it
            if pending is not None:
                raw = await pending
                dec.stats["syncs"] += 1
        if cpu is not None:
            cpu.end_token()
        streamer.advance_token()
        prefetch.score()
        return (raw.to_bytes() if want_logits else None), missed
