"""The decode loop over a model store, with the routed experts streamed into a GPU pool.

`await StoreDecoder.open_store(sink, budget_bytes=...)` (or `options=StoreOptions(...)`, options.py) loads the dense
planes from dense.bin, sizes the expert pool from the budget (memory_plan.py, budget.py) and records one token's
dispatches with the pool kernels (expert_pool.py).

How a token runs depends on the pool size:
- **full pool** (a slot for every expert of every layer): every record is paged in at load; routing, the residency
  check and the expert products all stay on the GPU and a token is the stock `Decoder.step`: one submit, one sync
  (the logits readback). `feed` enqueues prompt tokens with no sync at all.
- **partial pool, routing="early_stop"** (early_stop.py, token_runners.EarlyStopRunner): one submit per token; a
  layer whose picked experts are not all resident stops the token on the GPU, the CPU pages them in and resumes at
  that layer. A token costs 1 + (layers that missed) syncs; fed prompt tokens cost one small readback each (the
  stop flag).
- **partial pool, routing="per_layer"** (the simple fallback, token_runners.PerLayerRunner): the token's list is
  cut at each MoE layer's residency check; per layer the CPU reads the k routed ids back, `ensure`s them and submits
  the MoE part with the next layer's attention part: n_layers + 1 syncs per token, missing or not.
- **partial pool, routing="auto"** (default): early stop while fewer than `auto_threshold` (1/4) of the layers
  missed recently, per-layer syncs otherwise (every resume re-submits the rest of the token: when most layers miss
  that costs more than a sync per layer; on lavapipe a resume costs ~15 ms against ~2 ms per layer sync).
- **CPU expert tier** (StoreOptions(cpu_tier=N), cpu_tier_path.py): per-layer routing, where the misses the cost
  model places on the CPU are computed by its workers and their weighted sum added on the GPU.
- **token table rows on demand** (StoreOptions(embedding_rows=S), or the memory plan's choice under a tight budget:
  embedding_rows.py): the table stays in the store; the ids each submit embeds are looked up in a row cache first
  (missing rows read and uploaded), so fed tokens wait for the next step even with a full pool, and greedy steps are
  never queued ahead (the next id must be known on the host).
In every partial mode each layer's attention or DeltaNet part runs exactly once per token (never re-run on a
resume), misses are read from the store and uploaded through the staging ring (or writeBuffer), and the residency
map is flushed to the GPU before the submit that routes through it.
"""
import array
import time
from contextlib import nullcontext
from dataclasses import replace

from ..gguf.types import GGMLType
from ..gpu.buffers import COPY_DST, MAP_READ, UNIFORM, create_buffer
from ..gpu.commands import DispatchList, check_errors, helper, track_errors
from ..gpu.device import open_gpu
from ..gpu.pipelines import GpuErrorScope, Pipelines
from ..models.cache import Activations, KVCache
from ..models.registry import architecture
from .early_stop import GuardedToken
from .embedding_rows import TABLE, CachedEmbedding
from .decoder import Decoder
from .cpu_tier_path import CpuTierPath
from .expert_pool import MAX_TOP_K, ExpertPool, StreamingKernels
from .lookahead import RouterLookAhead
from .memory_plan import plan_memory
from .options import StoreOptions
from .store_weights import StoreRecordReader, StoreWeightLoader, open_store
from .token_runners import EarlyStopRunner, PerLayerRunner, Prefetcher
from .upload_meter import meter_for
from ..store.check import with_record_checks
from ..store.node_reader import record_reader_for


class StoreDecoder(Decoder):
    pool = None
    plan = None
    cpu_tier = None  # a CpuTierPath (cpu_tier_path.py) with StoreOptions(cpu_tier=N) and a partial pool
    chains = False  # a token may stop at a layer whose experts are not resident: no step queued behind it
    whole_prompts = False  # the prompt's last token takes step (its layers may page experts in)
    kernels_class = StreamingKernels  # a measurement may record more around the residency checks (lab/)
    embedding_rows = None  # a CachedEmbedding when the token table's rows come on demand (embedding_rows.py)

    @classmethod
    async def open_store(cls, sink, gpu=None, pipelines=None, options: StoreOptions = None, reader=None,
                         **overrides):
        """A decoder over the model store in `sink` under StoreOptions (`options`, its fields replaced by any given
        as keywords): load the dense planes, plan the GPU memory (memory_plan.py), fill a full pool, record the
        token. `reader`: the store's record reader (default: one over `sink`)."""
        opts = StoreOptions.make(options, **overrides)
        t0 = time.perf_counter()
        manifest, header = await open_store(sink)
        spec = architecture(header.architecture)
        cfg = spec.config.from_header(header)
        model = spec.model()(cfg)
        ex = manifest["layout"]["experts"]
        if not ex or ex["layers"] != list(range(cfg.n_layer)):
            raise ValueError("the store's expert records do not cover every layer of the model")
        gpu = gpu or await open_gpu()
        track_errors(gpu)
        pipelines = pipelines or Pipelines(gpu)
        mem = plan_memory(model, manifest, gpu, opts, header)
        plan = mem.budget
        # Node: records read in parallel through Node's fs (node_reader.py); elsewhere the sink's reads
        reader = reader or await record_reader_for(sink, manifest) or StoreRecordReader(sink, manifest)
        reader = with_record_checks(sink, reader)  # readers that bypass a checking sink check records too
        loader = StoreWeightLoader(gpu, manifest, header, sink)
        async with GpuErrorScope(gpu, "loading the model from its store"):
            rows = None
            if mem.embedding.on_demand:  # the token table stays in the store; its rows come through a row cache
                rows = loader.on_demand[TABLE] = CachedEmbedding(gpu, sink, manifest, cfg.n_vocab, cfg.n_embd,
                                                                 mem.embedding.slots, pipelines)
            model.load(loader)
            # the dense planes, then (a full pool) every expert record: one count of bytes for the page
            meter = meter_for(opts.upload_progress, loader.bytes_planned + (
                cfg.n_layer * cfg.n_expert * plan.pool.record_bytes if plan.full else 0))
            await loader.fill(meter=meter)
            acts = Activations(gpu)
            for name, n in model.work_buffers():
                acts.add(name, n)
            cache = (model.kv_cache(gpu, mem.n_ctx, opts.kv_format, mem.prefill_chunk) if hasattr(model, "kv_cache")
                     else KVCache(gpu, cfg.n_kv_layers, mem.n_ctx, cfg.n_head_kv, cfg.head_dim, opts.kv_format))
            step_buf = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
            pool = ExpertPool(gpu, plan.pool, n_layers=cfg.n_layer, n_experts=cfg.n_expert, reader=reader,
                              upload=opts.upload, ring_buffers=opts.ring_buffers, policy=opts.policy)
        t_pool = time.perf_counter()
        if plan.full:
            await pool.load_all(meter)
        if meter is not None:
            meter.finish()
        cpu = None
        if opts.cpu_tier and not plan.full:
            if not opts.q8_act and any(t in (GGMLType.Q8_0, GGMLType.Q4_0) for t in ex["types"].values()):
                raise ValueError("the CPU expert tier quantises activations for Q8_0 and Q4_0 experts as the GPU's "
                                 "default does: it cannot run with q8_act off")
            cpu = await CpuTierPath.open(gpu, ex, pool, reader, k=cfg.n_expert_used, workers=opts.cpu_tier,
                                         mode=opts.cpu_tier_place, per_layer=opts.cpu_tier_max,
                                         url=opts.cpu_tier_url, experts=spec.cpu_experts)
            if spec.cpu_experts.down_scale:
                cpu.fold_scales([await loader.values(f"blk.{i}.{spec.cpu_experts.down_scale}")
                                 for i in range(cfg.n_layer)])
            pool.streamer.placement = cpu.placement
            opts = replace(opts, routing="per_layer")  # the tier serves the misses of the per-layer loop
        dec = cls(gpu, pipelines, model, loader, acts, cache, pool.slot_map, step_buf, opts.kv_format)
        dec.pool, dec.plan, dec.reader, dec.cpu_tier = pool, plan, reader, cpu
        dec.embedding_rows = rows
        dec.kern = cls.kernels_class(gpu, pipelines, step_buf, pool, lane_cap=opts.lane_cap,
                                    kv_format=opts.kv_format, q8_act=opts.q8_act)
        if cpu is not None:
            cpu.hook(dec.kern, acts)
        await dec._record(opts, mem)
        dec._start_routing(opts)
        dec.stats.update(load_ms=(time.perf_counter() - t0) * 1e3, pool_fill_ms=(time.perf_counter() - t_pool) * 1e3,
                         weights_bytes=loader.bytes_uploaded, dispatches=dec.dl.count, kv_bytes=cache.nbytes,
                         activation_bytes=acts.nbytes, n_ctx=mem.n_ctx, kv=opts.kv_format, arch=spec.name,
                         budget=plan.to_dict(), mode="full" if plan.full else "partial", upload=opts.upload,
                         routing=dec.routing, prefetch_depth=opts.prefetch_depth,
                         prefetch_guess=dec.prefetch_guess if dec.routing != "gpu" else None,
                         lookahead_source=opts.lookahead_source if dec.lookahead is not None else None,
                         prefetch_wait=opts.prefetch_wait, guessed=0, guess_hits=0, syncs=0, steps=0, resumes=0,
                         early_stop_tokens=0, per_layer_tokens=0, per_layer_steps=0,
                         embedding=mem.embedding.to_dict(), gpu_bytes=dec._gpu_bytes_used(mem.state_bytes))
        return dec

    async def _record(self, opts, mem):
        """Record the token's dispatches (with the early-stop guards where a partial pool stops early), the
        prefill chunk and the stagings, then cut the token at each layer's residency check where the CPU routes."""
        gpu, cfg, acts, plan = self.gpu, self.model.cfg, self.acts, mem.budget
        async with GpuErrorScope(gpu, "recording the token's dispatches"):
            # a full pool never misses, so never prefetches: no look-ahead there
            self.lookahead = (RouterLookAhead(gpu, self.model, acts, opts.prefetch_depth, opts.lookahead_source)
                              if mem.lookahead and not plan.full else None)
            self.kern.lookahead = self.lookahead
            self.dl = DispatchList()
            self.model.record_token(self.kern, self.dl, acts, self.cache, self.pool.slot_map)
            self.staging = create_buffer(gpu, 4 * cfg.n_vocab, MAP_READ | COPY_DST, "logits_staging")
            self.argmax_staging = create_buffer(gpu, 8, MAP_READ | COPY_DST, "argmax_staging")
            extra = self.cpu_tier.readback_bytes if self.cpu_tier is not None else 0  # weights and xn
            self.ids_staging = create_buffer(gpu, 4 * MAX_TOP_K * (1 + opts.prefetch_depth) + extra,
                                             MAP_READ | COPY_DST, "route_ids_staging")
            self.guarded = None
            if plan.full or opts.routing == "per_layer":
                self.kern.finish(self.dl)
            else:
                self.guarded = GuardedToken(gpu, self.kern, self.dl, self.pool, acts["logits"], cfg.n_vocab,
                                            self.lookahead)
            self.attach_prefill(mem.prefill_chunk)  # the chunk's expert products read the same pool and slot map
            self.attach_checkpoints(mem.checkpoints)
        if self.guarded is not None and 2 * self.guarded.args_bytes > mem.guard_allowance:
            raise RuntimeError(f"the token records {self.dl.count} dispatches, more than the budget allowed for "
                               f"(raise GUARD_DISPATCHES_PER_LAYER)")

    def _start_routing(self, opts):
        """The routing mode and its per-token state. per_layer asked for explicitly keeps the CPU in the routing loop
        even with every expert resident (`diskformer run --no-gpu-routing`): the same logits, n_layers + 1 syncs
        per token."""
        full = self.plan.full
        self.routing = "per_layer" if opts.routing == "per_layer" else ("gpu" if full else opts.routing)
        self.auto_threshold = opts.auto_threshold
        self._miss_rate = 1.0  # a fresh pool misses everywhere
        self._pending = []
        self.prefetch_depth = opts.prefetch_depth
        self.prefetch_guess = opts.prefetch_guess if opts.prefetch_depth else None
        self.prefetch = prefetch = Prefetcher(self, opts.prefetch_depth, self.prefetch_guess, opts.prefetch_wait)
        self.early_stop = EarlyStopRunner(self, self.guarded, prefetch) if self.guarded is not None else None
        # after finish(): the per-layer runner's segments copy the finished residency checks
        cut = opts.routing == "per_layer" or (not full and opts.routing != "early_stop")
        self.per_layer = PerLayerRunner(self, prefetch) if cut else None

    def _gpu_bytes_used(self, state_bytes) -> dict:
        cfg = self.model.cfg
        checkpoints = self.checkpoints.nbytes if self.checkpoints is not None else 0
        used = {"dense": self.loader.bytes_planned, "kv_state": self.cache.nbytes + state_bytes + checkpoints,
                "activations": self.acts.nbytes - state_bytes,
                "staging": 4 * cfg.n_vocab + 4 * MAX_TOP_K + 16, "pool": self.pool.nbytes,
                "early_stop": self.guarded.gpu_bytes if self.guarded is not None else 0,
                "prefill": self.prefill.nbytes if self.prefill is not None else 0,
                "lookahead": self.lookahead.nbytes if self.lookahead is not None else 0,
                "cpu_tier": self.cpu_tier.nbytes if self.cpu_tier is not None else 0,
                "embedding_rows": self.embedding_rows.nbytes if self.embedding_rows is not None else 0}
        used["total"] = sum(used.values())
        return used

    # ---- the token loop -----------------------------------------------------------------------------------------
    def reset(self):
        super().reset()
        self._pending.clear()

    @property
    def feeds_at_step(self) -> bool:
        """Fed tokens wait for the next step: their layers page experts in, or their embedding rows are read first."""
        return self.routing != "gpu" or self.embedding_rows is not None

    def _rows(self, ids):
        """The embedding rows of `ids` pinned around the submits inside the block (rows on demand), else nothing."""
        return self.embedding_rows.pinned(ids) if self.embedding_rows is not None else nullcontext()

    def feed(self, tokens) -> None:
        if not self.feeds_at_step:
            return super().feed(tokens)
        tokens = [int(t) for t in tokens]
        self._check_tokens(tokens)
        for t in tokens:  # run at the next step()
            self._pending.append((t, self.pos))
            self.pos += 1

    async def _feed_resident(self):
        """Every expert resident, rows on demand: the fed tokens, a chunk (or a token) at a time, each chunk's rows
        pinned around its submit."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        tokens, pos0 = [t for t, _ in pending], pending[0][1]
        t0 = time.perf_counter()
        per = self.prefill.T if self.prefill is not None else 1
        for s in range(0, len(tokens), per):
            part = tokens[s:s + per]
            async with self._rows(part):
                if len(part) > 1:
                    self.prefill.feed(part, pos0 + s)
                else:
                    helper().feed(self.gpu.device, self.step_buf, part, pos0 + s, self.dl.ops)
        self.stats["tokens"] += len(tokens)
        self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3

    async def step(self, token: int) -> array.array:
        self.stats["steps"] += 1
        if self.routing == "gpu":
            if self.embedding_rows is None:
                return await super().step(token)
            self._check_tokens([token])
            await self._feed_resident()
            async with self._rows([token]):
                return await super().step(token)
        self._check_tokens([token])
        t0 = time.perf_counter()
        pending, self._pending = self._pending, []
        if self.prefill is not None and len(pending) > 1:  # batched: one routed-ids readback per chunk and layer
            tokens, pos0 = [t for t, _ in pending], pending[0][1]
            for s in range(0, len(tokens), self.prefill.T):
                async with self._rows(tokens[s:s + self.prefill.T]):
                    await self.prefill.run_streamed(tokens[s:s + self.prefill.T], pos0 + s, self.stats)
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
            if self.embedding_rows is None:
                return await super().step_argmax(token)
            self._check_tokens([token])
            await self._feed_resident()
            async with self._rows([token]):
                return await super().step_argmax(token)
        logits = await self.step(token)
        best = max(logits)
        return logits.index(best), best  # the lowest id holding the maximum, as the GPU kernel

    # a queued greedy step takes its token from the GPU's argmax: with rows on demand the host must know every id
    # before its submit (to read its row), so steps are read back one by one (step_argmax)
    def _refuse_queue(self):
        if self.embedding_rows is not None:
            raise RuntimeError("the token table's rows come on demand: each token's id must be known before its step "
                               "is submitted, so greedy steps cannot be queued ahead; use step_argmax")

    def launch_argmax(self, token=None):
        self._refuse_queue()
        return super().launch_argmax(token)

    def launch_argmax_run(self, k: int, token=None):
        self._refuse_queue()
        return super().launch_argmax_run(k, token)

    def launch_prompt_argmax(self, ids):
        self._refuse_queue()
        return super().launch_prompt_argmax(ids)

    async def _run_token(self, token, pos, want_logits):
        """Early stop while few layers miss (one sync per token when none does), else per-layer syncs (each
        resume of an early stop re-submits the rest of the token, which costs more than a sync per layer when most
        layers miss). "auto" follows the recent share of layers that missed."""
        early = self.routing == "early_stop" or (self.routing == "auto" and self._miss_rate < self.auto_threshold)
        async with self._rows([token]):
            if early:
                self.stats["early_stop_tokens"] += 1
                data, missed = await self.early_stop.run(token, pos, want_logits)
            else:
                self.stats["per_layer_tokens"] += 1
                self.stats["per_layer_steps"] += int(want_logits)
                data, missed = await self.per_layer.run(token, pos, want_logits)
        self._miss_rate = 0.8 * self._miss_rate + 0.2 * missed / len(self.kern.splits)
        return data

    # ---- bookkeeping --------------------------------------------------------------------------------------------
    def release(self):
        super().release()
        self.pool.release()
        if hasattr(self.reader, "release"):  # the Node reader's file handle, the browser's reader workers
            self.reader.release()
        self.ids_staging.destroy()
        if self.cpu_tier is not None:
            self.cpu_tier.release()
        if self.guarded is not None:
            self.guarded.release()
        if self.lookahead is not None:
            self.lookahead.release()
        if self.embedding_rows is not None:
            self.embedding_rows.release()

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
        s["embedding_rows"] = self.embedding_rows.summary() if self.embedding_rows is not None else None
        s["cpu_tier"] = (self.cpu_tier.summary(self.pool.streamer.counters, s.get("tokens") or 0)
                         if self.cpu_tier is not None else None)
        return s
