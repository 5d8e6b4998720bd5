"""The decode loop over a model store, with the routed experts streamed into a GPU pool.

`await StoreDecoder.open_store(sink, budget_bytes=...)` loads the dense planes from dense.bin, sizes the expert
pool from the budget (budget.py) and records one token's dispatches with the pool kernels (expert_pool.py).

How a token runs depends on the pool size:
- **full pool** (a slot for every expert of every layer): every record is paged in at load; routing, the residency
  check and the expert products all stay on the GPU and a token is the stock `Decoder.step`: one submit, one sync
  (the logits readback). `feed` enqueues prompt tokens with no sync at all.
- **partial pool, routing="early_stop"** (early_stop.py): one submit per token; a layer whose picked
  experts are not all resident stops the token on the GPU, the CPU pages them in and resumes at that layer. A token
  costs 1 + (layers that missed) syncs; fed prompt tokens cost one small readback each (the stop flag).
- **partial pool, routing="per_layer"** (the simple fallback): the token's list is cut at each MoE layer's
  residency check; per layer the CPU reads the k routed ids back, `ensure`s them and submits the MoE part with the
  next layer's attention part: n_layers + 1 syncs per token, missing or not.
- **partial pool, routing="auto"** (default): early stop while fewer than `auto_threshold` (1/4) of the layers
  missed recently, per-layer syncs otherwise (every resume re-submits the rest of the token: when most layers miss
  that costs more than a sync per layer; on lavapipe a resume costs ~15 ms against ~2 ms per layer sync).
In every partial mode each layer's attention or DeltaNet part runs exactly once per token (never re-run on a
resume), misses are read from the store and uploaded through the staging ring (or writeBuffer), and the residency
map is flushed to the GPU before the submit that routes through it.
"""
import array
import asyncio
import struct
import time

import js

from ..gpu.buffers import COPY_DST, MAP_READ, UNIFORM, create_buffer
from ..gpu.commands import DispatchList, check_errors, helper, track_errors
from ..gpu.device import open_gpu
from ..gpu.pipelines import GpuErrorScope, Pipelines
from ..models.cache import STATE_BUFFERS, Activations, KVCache, kv_cache_bytes
from ..models.registry import architecture
from .budget import min_pool_bytes, plan_budget
from .early_stop import GuardedToken, helper as copies_helper
from .decoder import Decoder, default_prefill_chunk
from .expert_pool import MAX_TOP_K, ExpertPool, StreamingKernels
from .lookahead import SOURCES, RouterLookAhead
from .prefill import chunk_bytes
from .store_weights import StoreRecordReader, StoreWeightLoader, dense_gpu_bytes, open_store

ROUTINGS = ("auto", "early_stop", "per_layer")
GUESSES = ("lookahead", "previous")  # what prefetch guesses: the router look-ahead, or the previous token's picks
GUARD_DISPATCHES_PER_LAYER = 48  # qwen3moe records 14 per layer, qwen35moe ~25 (+ 3 per pool buffer)


def guard_args_allowance(n_layers, all_experts_bytes, gpu, max_pool_buffer=None, extra_per_layer=0) -> int:
    """Upper bound of the early-stop indirect arguments (two copies, 12 B per dispatch), before the token is
    recorded: at most GUARD_DISPATCHES_PER_LAYER dispatches per layer besides 3 per pool buffer (and the
    look-ahead's `extra_per_layer`)."""
    limit = min(gpu.max_binding, int(gpu.limits["maxBufferSize"]), max_pool_buffer or gpu.max_binding)
    buffers = -(-all_experts_bytes // max(1, limit)) + 1
    return 24 * (n_layers * (GUARD_DISPATCHES_PER_LAYER + 3 * buffers + extra_per_layer) + 16)


# The prefill chunk's work buffers take at most this share of a GPU budget: a small budget keeps its bytes for the
# dense weights and the expert slots (the chunk halves until it fits, down to MIN_FITTED_CHUNK).
PREFILL_BUDGET_SHARE = 1 / 8
MIN_FITTED_CHUNK = 16


def fit_prefill_chunk(model, chunk: int, budget_bytes, rest: int) -> int:
    """The prefill chunk a store engine uses under `budget_bytes` (bytes, None or "min"): `chunk`, halved while its
    work buffers (prefill.chunk_bytes) would take more than PREFILL_BUDGET_SHARE of the budget or not fit beside
    `rest` (everything else the smallest plan needs). Down to MIN_FITTED_CHUNK, whatever the budget: the smallest
    budget the engine names in BudgetTooSmall is the one that runs at that chunk."""
    if not isinstance(budget_bytes, int) or isinstance(budget_bytes, bool):
        return chunk
    while chunk > MIN_FITTED_CHUNK and (chunk_bytes(model, chunk) > PREFILL_BUDGET_SHARE * budget_bytes
                                        or rest + chunk_bytes(model, chunk) > budget_bytes):
        chunk = max(MIN_FITTED_CHUNK, chunk // 2)
    return chunk


class StoreDecoder(Decoder):
    pool = None
    plan = None
    chains = False  # a token may stop at a layer whose experts are not resident: no step queued behind it
    whole_prompts = False  # the prompt's last token takes step (its layers may page experts in)

    @classmethod
    async def open_store(cls, sink, gpu=None, pipelines=None, n_ctx=2048, kv_format="f16", lane_cap=16,
                         budget_bytes=None, upload="staging", ring_buffers=4, policy="lru", max_pool_buffer=None,
                         reader=None, routing="auto", prefetch_depth=0, pool_fraction=None, auto_threshold=0.25,
                         prefill_chunk=None, prefetch_guess="lookahead", lookahead_source="h",
                         prefetch_wait=False, q8_act=True):
        """prefetch_depth: on a stop at layer L (early stop) or L's ids read back (per-layer), prefetch guesses for
        layers L+1 .. L+depth; prefetch_guess "lookahead" (their routers on L's activations, lookahead.py) or
        "previous" (what they picked for the previous token); lookahead_source "h" or "xn" (lookahead.py says
        which input). prefetch_wait: an early stop resumes only once layer L+1's guessed experts are in. q8_act:
        as Decoder.open."""
        if routing not in ROUTINGS:
            raise ValueError(f"routing {routing!r}: use one of {', '.join(ROUTINGS)}")
        if prefetch_guess not in GUESSES:
            raise ValueError(f"prefetch_guess {prefetch_guess!r}: use one of {', '.join(GUESSES)}")
        if lookahead_source not in SOURCES:
            raise ValueError(f"lookahead_source {lookahead_source!r}: use one of {', '.join(SOURCES)}")
        t0 = time.perf_counter()
        manifest, header = await open_store(sink)
        arch = header.architecture
        spec = architecture(arch)
        cfg = spec.config.from_header(header)
        model = spec.model()(cfg)
        if cfg.n_ctx_train:
            n_ctx = min(n_ctx, cfg.n_ctx_train)
        ex = manifest["layout"]["experts"]
        if not ex or ex["layers"] != list(range(cfg.n_layer)):
            raise ValueError("the store's expert records do not cover every layer of the model")
        gpu = gpu or await open_gpu()
        track_errors(gpu)
        pipelines = pipelines or Pipelines(gpu)
        n_kv_layers = cfg.n_kv_layers
        bufs = model.work_buffers()
        state = sum(4 * n for name, n in bufs if name.startswith(STATE_BUFFERS))
        acts_bytes = sum(4 * n for _, n in bufs)
        record = ex["record_size"]
        look = prefetch_depth > 0 and prefetch_guess == "lookahead"
        la_extra = (3 if lookahead_source == "h" else 2) * prefetch_depth if look else 0
        la_bytes = RouterLookAhead.gpu_bytes(cfg, prefetch_depth) if look else 0
        # activations, logits and ids staging, the step uniform, the early-stop readback (logits + routed ids) and
        # indirect arguments (counted whatever the mode: the mode follows from the pool size), the pool's own
        # small buffers
        work = (acts_bytes - state + 4 * cfg.n_vocab + 4 * MAX_TOP_K + 16
                + 4 * cfg.n_vocab + 256 + 4 * cfg.n_expert_used * cfg.n_layer
                + guard_args_allowance(cfg.n_layer, cfg.n_expert * cfg.n_layer * record, gpu, max_pool_buffer,
                                       la_extra) + la_bytes
                + ExpertPool.overhead_bytes(record, cfg.n_layer, cfg.n_expert, upload, ring_buffers))
        dense = dense_gpu_bytes(manifest)
        kv_state = kv_cache_bytes(n_kv_layers, n_ctx, cfg.n_head_kv, cfg.head_dim, kv_format) + state
        rest = dense + kv_state + work + min_pool_bytes(record, cfg.n_layer, cfg.n_expert, cfg.n_expert_used)
        prefill_chunk = default_prefill_chunk(gpu, cfg) if prefill_chunk is None else prefill_chunk
        prefill_chunk = fit_prefill_chunk(model, prefill_chunk, budget_bytes, rest)
        work += chunk_bytes(model, prefill_chunk)
        plan = plan_budget(budget_bytes, dense=dense, kv_state=kv_state, work=work, record_bytes=record, n_layers=cfg.n_layer, n_experts=cfg.n_expert,
                           top_k=cfg.n_expert_used, max_binding=gpu.max_binding, max_buffer=gpu.limits["maxBufferSize"],
                           max_pool_buffer=max_pool_buffer, pool_fraction=pool_fraction)
        reader = reader or StoreRecordReader(sink, manifest)
        loader = StoreWeightLoader(gpu, manifest, header, sink)
        async with GpuErrorScope(gpu, "loading the model from its store"):
            model.load(loader)
            await loader.fill()
            acts = Activations(gpu)
            for name, n in bufs:
                acts.add(name, n)
            cache = KVCache(gpu, n_kv_layers, n_ctx, cfg.n_head_kv, cfg.head_dim, kv_format)
            step_buf = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
            pool = ExpertPool(gpu, plan.pool, n_layers=cfg.n_layer, n_experts=cfg.n_expert, reader=reader,
                              upload=upload, ring_buffers=ring_buffers, policy=policy)
        t_pool = time.perf_counter()
        if plan.full:
            await pool.load_all()
        dec = cls(gpu, pipelines, model, loader, acts, cache, pool.slot_map, step_buf, kv_format)
        dec.pool, dec.plan, dec.reader = pool, plan, reader
        dec.kern = StreamingKernels(gpu, pipelines, step_buf, pool, lane_cap=lane_cap, kv_format=kv_format,
                                    q8_act=q8_act)
        async with GpuErrorScope(gpu, "recording the token's dispatches"):
            # a full pool never misses, so never prefetches: no look-ahead there
            dec.lookahead = (RouterLookAhead(gpu, model, acts, prefetch_depth, lookahead_source)
                             if look and not plan.full else None)
            dec.kern.lookahead = dec.lookahead
            dec.dl = DispatchList()
            model.record_token(dec.kern, dec.dl, acts, cache, pool.slot_map)
            dec.staging = create_buffer(gpu, 4 * cfg.n_vocab, MAP_READ | COPY_DST, "logits_staging")
            dec.argmax_staging = create_buffer(gpu, 8, MAP_READ | COPY_DST, "argmax_staging")
            dec.ids_staging = create_buffer(gpu, 4 * MAX_TOP_K * (1 + prefetch_depth), MAP_READ | COPY_DST,
                                            "route_ids_staging")
            dec.guarded = None
            if plan.full or routing == "per_layer":
                dec.kern.finish(dec.dl)
            else:
                dec.guarded = GuardedToken(gpu, dec.kern, dec.dl, pool, acts["logits"], cfg.n_vocab, dec.lookahead)
            dec.attach_prefill(prefill_chunk)  # the chunk's expert products read the same pool and slot map
        if routing == "per_layer" or (not plan.full and routing != "early_stop"):
            dec._cut_segments()  # after finish(): the slices copy the finished residency checks
        # per_layer asked for explicitly keeps the CPU in the routing loop even with every expert resident
        # (`diskformer run --no-gpu-routing`): the same logits, n_layers + 1 syncs per token
        dec.routing = "per_layer" if routing == "per_layer" else ("gpu" if plan.full else routing)
        dec.auto_threshold = auto_threshold
        dec._miss_rate = 1.0  # a fresh pool misses everywhere
        dec._pending = []
        dec._prev_ids = {}
        dec._guesses = []  # (layer, guessed ids) prefetched in the current token, scored at its end
        dec.prefetch_guess = prefetch_guess if prefetch_depth else None
        dec.prefetch_wait = prefetch_wait
        used = {"dense": loader.bytes_planned, "kv_state": cache.nbytes + state, "activations": acts.nbytes - state,
                "staging": 4 * cfg.n_vocab + 4 * MAX_TOP_K + 16, "pool": pool.nbytes,
                "early_stop": dec.guarded.gpu_bytes if dec.guarded is not None else 0,
                "prefill": dec.prefill.nbytes if dec.prefill is not None else 0,
                "lookahead": dec.lookahead.nbytes if dec.lookahead is not None else 0}
        used["total"] = sum(used.values())
        if dec.guarded is not None and 2 * dec.guarded.args_bytes > guard_args_allowance(
                cfg.n_layer, cfg.n_expert * cfg.n_layer * record, gpu, max_pool_buffer, la_extra):
            raise RuntimeError(f"the token records {dec.dl.count} dispatches, more than the budget allowed for "
                               f"(raise GUARD_DISPATCHES_PER_LAYER)")
        dec.prefetch_depth = prefetch_depth
        dec.stats.update(load_ms=(time.perf_counter() - t0) * 1e3, pool_fill_ms=(time.perf_counter() - t_pool) * 1e3,
                         weights_bytes=loader.bytes_uploaded, dispatches=dec.dl.count, kv_bytes=cache.nbytes,
                         activation_bytes=acts.nbytes, n_ctx=n_ctx, kv=kv_format, arch=arch, budget=plan.to_dict(),
                         mode="full" if plan.full else "partial", upload=upload,
                         routing=dec.routing, prefetch_depth=prefetch_depth,
                         prefetch_guess=dec.prefetch_guess if dec.routing != "gpu" else None,
                         lookahead_source=lookahead_source if dec.lookahead is not None else None,
                         prefetch_wait=prefetch_wait, guessed=0, guess_hits=0, syncs=0, steps=0, resumes=0,
                         early_stop_tokens=0, per_layer_tokens=0, per_layer_steps=0, gpu_bytes=used)
        return dec

    def _cut_segments(self):
        """Cut the recorded token at each layer's residency check (partial pool): segment 0 runs up to layer 0's
        router; segment i + 1 runs layer i's experts up to layer i + 1's router (or the logits). The readback of
        the segment ending at layer j's check brings j's routed ids and the look-ahead's guesses made at j."""
        splits = self.kern.splits
        if len(splits) != self.model.cfg.n_layer:
            raise RuntimeError(f"recorded {len(splits)} MoE layers for a {self.model.cfg.n_layer}-layer model")
        cuts = [s[1] for s in splits] + [self.dl.count]
        self.segments = [self.dl.ops.slice(0, cuts[0])]
        self.segments += [self.dl.ops.slice(cuts[i], cuts[i + 1]) for i in range(len(splits))]
        self.segment_reads = []  # per layer: (copies into ids_staging, bytes)
        for layer, _, route_ids, k in splits:
            copies = [(route_ids, 0, 0, 4 * k)]
            if self.lookahead is not None:
                copies += self.lookahead.copies([layer], 4 * k)[0]
            self.segment_reads.append((js.Array.of(*(js.Array.of(*c) for c in copies)),
                                       sum(c[3] for c in copies)))

    # ---- the token loop -----------------------------------------------------------------------------------------
    def reset(self):
        super().reset()
        self._pending.clear()

    def feed(self, tokens) -> None:
        if self.routing == "gpu":
            return super().feed(tokens)
        tokens = [int(t) for t in tokens]
        self._check_tokens(tokens)
        for t in tokens:  # run at the next step(): each needs per-layer syncs
            self._pending.append((t, self.pos))
            self.pos += 1

    async def step(self, token: int) -> array.array:
        self.stats["steps"] += 1
        if self.routing == "gpu":
            return await super().step(token)
        self._check_tokens([token])
        t0 = time.perf_counter()
        pending, self._pending = self._pending, []
        if self.prefill is not None and len(pending) > 1:  # batched: one routed-ids readback per chunk and layer
            await self.prefill.run_streamed([t for t, _ in pending], pending[0][1], self.stats)
            self.stats["tokens"] += len(pending)
            pending = []
        for t, p in pending:
            await self._run_token(t, p, want_logits=False)
        data = await self._run_token(token, self.pos, want_logits=True)
        logits = array.array("f")
        logits.frombytes(data)
        self.pos += 1
        self.stats["tokens"] += 1 + len(pending)
        self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3
        check_errors(self.gpu, f"token at position {self.pos - 1}")
        return logits

    async def step_argmax(self, token: int) -> tuple:
        """(id, logit) of the token's largest logit: from the GPU's argmax when every expert is resident (one
        submit, 8 bytes back), else from the logits the routing paths read back anyway."""
        if self.routing == "gpu":
            self.stats["steps"] += 1
            return await super().step_argmax(token)
        logits = await self.step(token)
        best = max(logits)
        return logits.index(best), best  # the lowest id holding the maximum, as the GPU kernel

    async def _run_token(self, token, pos, want_logits):
        """Early stop while few layers miss (one sync per token when none does), else per-layer syncs (each
        resume of an early stop re-submits the rest of the token, which costs more than a sync per layer when most
        layers miss). "auto" follows the recent share of layers that missed."""
        early = self.routing == "early_stop" or (self.routing == "auto" and self._miss_rate < self.auto_threshold)
        if early:
            self.stats["early_stop_tokens"] += 1
            resumes = self.stats["resumes"]
            data = await self._guarded_token(token, pos, want_logits)
            missed = self.stats["resumes"] - resumes
        else:
            self.stats["per_layer_tokens"] += 1
            self.stats["per_layer_steps"] += int(want_logits)
            data, missed = await self._partial_token(token, pos, want_logits)
        self._miss_rate = 0.8 * self._miss_rate + 0.2 * missed / len(self.kern.splits)
        return data

    async def _guarded_token(self, token, pos, want_logits):
        g = self.guarded
        raw = await g.run(self.step_buf, [token, pos, pos + 1, 0], want_logits, self.stats,
                          self._prefetch_at_stop if self.prefetch_depth else None)
        self._prev_ids = {layer: g.routed_ids(raw, i) for i, layer in enumerate(g.layers)}
        self._score_guesses()
        return g.logits(raw) if want_logits else None

    def _prefetch_at_stop(self, layer, raw):
        """Early stop at `layer`: prefetch the guesses for the next layers (the look-ahead's, in `raw`). With
        prefetch_wait, a task the resume waits for: layer + 1's guessed experts loaded."""
        la = self.guarded.lookahead_ids(raw, layer) if self.lookahead is not None else None
        first = self._prefetch_after(layer, la)
        if self.prefetch_wait and first is not None:
            return asyncio.ensure_future(self.pool.streamer.wait_for(layer + 1, first))
        return None

    def _prefetch_after(self, layer, lookahead=None):
        """Prefetch guesses for layers layer+1 .. layer+depth: the router look-ahead's ({target: ids}) or, for
        "previous", what those layers picked for the previous token. Returns the guesses for layer + 1."""
        first = None
        for nxt in range(layer + 1, min(layer + 1 + self.prefetch_depth, self.model.cfg.n_layer)):
            guesses = lookahead.get(nxt) if lookahead is not None else self._prev_ids.get(nxt)
            if guesses:
                self._guesses.append((nxt, guesses))
                self.pool.streamer.prefetch(nxt, guesses)
                if nxt == layer + 1:
                    first = guesses
        return first

    def _score_guesses(self):
        """At the end of a token (`_prev_ids` now holds its picks): how many guessed experts the layer picked."""
        for layer, guesses in self._guesses:
            picked = set(self._prev_ids.get(layer, ()))
            self.stats["guessed"] += len(guesses)
            self.stats["guess_hits"] += sum(1 for e in guesses if e in picked)
        self._guesses.clear()

    async def _partial_token(self, token, pos, want_logits):
        h, rb = helper(), copies_helper()
        dev, streamer = self.gpu.device, self.pool.streamer
        words = [token, pos, pos + 1, 0]
        splits = self.kern.splits
        copies, nbytes = self.segment_reads[0]
        raw = await rb.run(dev, self.step_buf, words, self.segments[0], copies, self.ids_staging, nbytes)
        self.stats["syncs"] += 1
        missed = 0
        for i, (layer, _, _, k) in enumerate(splits):
            data = raw.to_bytes()
            ids = struct.unpack_from(f"<{k}I", data, 0)
            self._prev_ids[layer] = ids
            m0 = streamer.counters.misses[layer]
            pending_slots = streamer.ensure(layer, ids)
            missed += streamer.counters.misses[layer] != m0  # claims (and miss counts) happen in the call
            if self.prefetch_depth:
                la = None if self.lookahead is None else self.lookahead.unpack(data, [layer], 4 * k).get(layer, {})
                self._prefetch_after(layer, la)
            slots = await pending_slots
            self.pool.flush_map()
            seg = self.segments[i + 1]
            if i + 1 < len(splits):
                copies, nbytes = self.segment_reads[i + 1]
                pending = rb.run(dev, self.step_buf, words, seg, copies, self.ids_staging, nbytes)
            elif want_logits:
                pending = h.step(dev, self.step_buf, words, seg, self.acts["logits"], 0, self.staging,
                                 4 * self.n_vocab)
            else:
                h.replay(dev, seg)
                pending = None
            streamer.release(set(slots))  # the submit that reads them is queued; later uploads come after it
            if pending is not None:
                raw = await pending
                self.stats["syncs"] += 1
        streamer.advance_token()
        self._score_guesses()
        return (raw.to_bytes() if want_logits else None), missed

    # ---- bookkeeping --------------------------------------------------------------------------------------------
    def release(self):
        super().release()
        self.pool.release()
        self.ids_staging.destroy()
        if self.guarded is not None:
            self.guarded.release()
        if self.lookahead is not None:
            self.lookahead.release()

    def summary(self) -> dict:
        s = super().summary()
        st = self.pool.streamer.stats()
        s["streamer"] = {k: v for k, v in st.items() if k != "per_layer"}
        # a step is a token whose logits are read; fed prompt tokens cost no sync with a full pool
        s["syncs_per_step"] = s["syncs"] / s["steps"] if s.get("steps") else None
        s["map_bytes_written"] = self.pool.map_bytes_written
        # prefetch accuracy: guess_accuracy = share of guessed experts the layer then picked in the same token
        # (every guess, resident or not); streamer.prefetch_accuracy = share of prefetch reads later demanded
        s["guess_accuracy"] = s["guess_hits"] / s["guessed"] if s.get("guessed") else None
        s["uploads"] = {"count": self.pool.uploads.uploads, "bytes": self.pool.uploads.bytes}
        return s
