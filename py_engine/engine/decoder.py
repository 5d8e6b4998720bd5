"""The decode loop: load a model onto the GPU, record one token's dispatches once, replay them per token.

Per token: one call into JS (write the step uniform, replay the recorded list, copy the logits to a staging
buffer, map it) and one await. A prompt goes through the batched prefill's chunks where one is attached
(prefill.py; with every expert resident its last token too, then only the output head: step_prompt), else through
the same step one token at a time.
"""
import array
import struct
import time
from dataclasses import dataclass

from ..gguf import read_gguf_file
from ..gguf.supported import check_supported
from ..gpu.buffers import COPY_DST, MAP_READ, STORAGE, UNIFORM, create_buffer, upload
from ..gpu.commands import DispatchList, check_errors, helper, track_errors
from ..gpu.device import open_gpu
from ..gpu.kernels import Kernels
from ..gpu.pipelines import GpuErrorScope, Pipelines
from ..models.cache import Activations, KVCache
from ..models.registry import architecture, tensor_types
from .checkpoints import StateCheckpoints, state_buffers
from .gpu_weights import WeightLoader
from ..gpu.chunk_kernels import FEW_PICKS
from .options import DecodeOptions
from .upload_meter import meter_for
from .prefill import Prefill
from .weight_source import FileWeightSource

# greedy steps launched and not yet read back, at most: generation keeps two (one queued behind the one it reads);
# the bench can keep a third, to see whether the GPU waits for the host between steps
STEPS_IN_FLIGHT = 3
# greedy tokens one submit may take (launch_argmax_run: the bench's --tokens-per-submit)
MAX_TOKENS_PER_SUBMIT = 16


# prompt tokens per batched prefill chunk on a GPU (prefill.py): on the H200 the 8-layer real-dimension file's
# kernels take 26.2 ms per 512-token chunk against 16.7 per 256-token one (13.1 per 256 tokens: the GEMMs get twice
# the token tiles; docs/results/2026-12-03-h200-prefill-chunk.json); ~0.4 MB of GPU work buffers per chunk token at
# those dimensions
DEFAULT_PREFILL_CHUNK = 512
# A CPU adapter (SwiftShader, lavapipe) pays for every launched workgroup, the idle rows of a short prompt's chunk
# included: 64 there (lavapipe, a 40-token prompt: 130 tok/s in chunks of 64, 74 in chunks of 256).
CPU_PREFILL_CHUNK = 64


def default_prefill_chunk(gpu, cfg=None) -> int:
    """The prefill chunk when none is asked for: CPU_PREFILL_CHUNK on a CPU adapter; on a GPU DEFAULT_PREFILL_CHUNK,
    halved while a chunk would give the routed experts more than FEW_PICKS picks each on average (qwen3moe's 128
    experts top-8: 256), where the few-picks kernels take 3.5x less time than the tiles
    (docs/results/2026-12-03-h200-prefill-chunk.json)."""
    if gpu.cpu_adapter:
        return CPU_PREFILL_CHUNK
    chunk = DEFAULT_PREFILL_CHUNK
    n_exp, k = getattr(cfg, "n_expert", 0), getattr(cfg, "n_expert_used", 0)
    while n_exp and chunk > CPU_PREFILL_CHUNK and -(-chunk * k // n_exp) > FEW_PICKS:
        chunk //= 2
    return chunk


class ContextFull(RuntimeError):
    pass


@dataclass(frozen=True)
class StepHandle:
    """A greedy step (or a run of k) queued without waiting for it (Decoder.launch_argmax): its readback, awaited by
    collect_argmax, in launch order."""
    promise: object  # the JS promise of the staging buffer's bytes
    ring: int  # which argmax staging buffer takes its result
    pos: int  # the position it feeds (its first, for a run)
    k: int = 1  # tokens it runs


class Decoder:
    def __init__(self, gpu, pipelines, model, loader, acts, cache, slot_map, step_buf, kv_format):
        self.gpu, self.pipes, self.model, self.loader = gpu, pipelines, model, loader
        self.acts, self.cache, self.slot_map, self.step_buf = acts, cache, slot_map, step_buf
        self.kv_format = kv_format
        self.pos = 0
        self._in_flight = []  # argmax_stagings indices of launched, uncollected greedy steps, oldest first
        # the step buffer holds the next position's parameters, left by the last launched step's argmax (_launch);
        # anything that writes the step buffer from the host says False
        self.next_step_on_gpu = False
        # while a benchmark times each greedy step's submitted pieces on the GPU (timing.step_passes): a callable
        # giving each launched step its timestamp writes (the replay helper's `ts`); None otherwise
        self.step_stamps = None
        self.dl = None
        self.staging = None
        self.prefill = None  # prefill.Prefill: prompts fed in chunks of prefill.T tokens (None: token by token)
        self.checkpoints = None  # checkpoints.StateCheckpoints of a model with recurrent state (None: none kept)
        # syncs: awaited GPU->CPU readbacks; ffi_calls: crossings from Python into JS on the token path (method
        # calls and property reads; the JS helper's own WebGPU calls are not crossings). Read by `diskformer bench`.
        # whole_prompts: prompts whose last token went through the chunks too (only the output head after them)
        self.stats = {"load_ms": 0.0, "tokens": 0, "step_ms_total": 0.0, "weights_bytes": 0, "dispatches": 0,
                      "syncs": 0, "ffi_calls": 0, "whole_prompts": 0}

    @classmethod
    async def open(cls, path, gpu=None, pipelines=None, options: DecodeOptions = None, **overrides):
        """A decoder over the GGUF at `path`, every expert resident, under DecodeOptions (`options`, its fields
        replaced by any given as keywords: `Decoder.open(path, n_ctx=256)`)."""
        opts = DecodeOptions.make(options, **overrides)
        n_ctx, kv_format = opts.n_ctx, opts.kv_format
        t0 = time.perf_counter()
        header = read_gguf_file(path)
        arch = header.architecture
        # refuse an unsupported architecture, tensor type or shape before the GPU is touched, with the reason
        check_supported(header, tensor_types=tensor_types(arch))
        spec = architecture(arch)
        cfg = spec.config.from_header(header)
        model = spec.model()(cfg)
        if cfg.n_ctx_train:
            n_ctx = min(n_ctx, cfg.n_ctx_train)
        gpu = gpu or await open_gpu()
        track_errors(gpu)
        pipelines = pipelines or Pipelines(gpu)
        source = FileWeightSource(path)
        # about every tensor of the file goes to the GPU, in as many bytes (a Q8_0 block's 34 split into codes and
        # scales): the meter's estimated total (upload_meter.py)
        meter = meter_for(opts.upload_progress, sum(t.nbytes for t in header.tensors_by_name.values()))
        loader = WeightLoader(gpu, header, source, meter=meter)
        async with GpuErrorScope(gpu, f"loading {path}"):
            model.load(loader)
            if meter is not None:
                meter.finish()
            acts = Activations(gpu)
            for name, n in model.work_buffers():
                acts.add(name, n)
            # a model whose layers do not all attend (qwen35moe) says how many own a KV cache
            chunk = default_prefill_chunk(gpu, cfg) if opts.prefill_chunk is None else opts.prefill_chunk
            # (gemma4's layers differ in their caches' shapes, its windows' rings hold a chunk more: its own)
            cache = model.kv_cache(gpu, n_ctx, kv_format, chunk) if hasattr(model, "kv_cache") else \
                KVCache(gpu, cfg.n_kv_layers, n_ctx, cfg.n_head_kv, cfg.head_dim, kv_format)
            # all experts resident: layer i's pool is its own expert tensor, slot = expert id
            ident = struct.pack(f"<{cfg.n_layer * cfg.n_expert}I", *(list(range(cfg.n_expert)) * cfg.n_layer))
            slot_map = upload(gpu, ident, "slot_map")
            step_buf = create_buffer(gpu, 16, UNIFORM | STORAGE | COPY_DST, "step")
        source.close()
        dec = cls(gpu, pipelines, model, loader, acts, cache, slot_map, step_buf, kv_format)
        dec.kern = Kernels(gpu, pipelines, step_buf, lane_cap=opts.lane_cap, kv_format=kv_format,
                           q8_act=opts.q8_act, advance_step=True)
        async with GpuErrorScope(gpu, "recording the token's dispatches"):
            dec.dl = DispatchList()
            model.record_token(dec.kern, dec.dl, acts, cache, slot_map)
            dec.staging = create_buffer(gpu, 4 * cfg.n_vocab, MAP_READ | COPY_DST, "logits_staging")
            dec.argmax_staging = create_buffer(gpu, 8, MAP_READ | COPY_DST, "argmax_staging")
            # a queued step's 8 bytes, or a run's 8 per token (launch_argmax_run)
            dec.argmax_stagings = [create_buffer(gpu, 8 * MAX_TOKENS_PER_SUBMIT, MAP_READ | COPY_DST,
                                                 f"argmax_staging{i}") for i in range(STEPS_IN_FLIGHT)]
            dec.attach_prefill(chunk)
            dec.attach_checkpoints(opts.state_checkpoints)
        dec.stats.update(load_ms=(time.perf_counter() - t0) * 1e3, weights_bytes=loader.bytes_uploaded,
                         dispatches=dec.dl.count, kv_bytes=cache.nbytes, activation_bytes=acts.nbytes,
                         n_ctx=n_ctx, kv=kv_format, arch=arch)
        return dec

    @property
    def n_vocab(self):
        return self.model.cfg.n_vocab

    def reset(self):
        """Forget the sequence (the cache rows are overwritten as positions are fed again)."""
        self.pos = 0
        self.next_step_on_gpu = False
        if self.checkpoints is not None:
            self.checkpoints.clear()  # their KV rows get overwritten

    # --- checkpoints of the recurrent state (checkpoints.py) ------------------------------------------------------
    def attach_checkpoints(self, count: int):
        """Keep up to `count` copies of the recurrent state (none for a model without recurrent layers)."""
        if count > 0 and (state_buffers(self.model) or getattr(self.model, "ring_layers", ())):
            self.checkpoints = StateCheckpoints(self.gpu, self.model, self.acts, count, self.cache)
        self.stats["state_checkpoints"] = self.checkpoints.count if self.checkpoints is not None else 0
        self.stats["checkpoint_bytes"] = self.checkpoints.nbytes if self.checkpoints is not None else 0

    def save_checkpoint(self) -> None:
        """Keep the state as it is now (self.pos tokens), queued behind the work submitted so far."""
        if self.checkpoints is None:
            return
        if self._in_flight or getattr(self, "_pending", None):
            raise RuntimeError("a checkpoint needs every fed token run and read back first")
        self.checkpoints.save(self.pos)

    def restore_checkpoint(self, at_most: int) -> int:
        """Go back to the longest checkpoint of at most `at_most` tokens; returns its token count (0: none, the
        sequence is reset)."""
        if not 0 <= at_most <= self.pos:
            raise ValueError(f"restore to at most {at_most} tokens, but the GPU state holds {self.pos}")
        n = self.checkpoints.restore(at_most) if self.checkpoints is not None else 0
        if n == 0:
            self.reset()
            return 0
        self.pos = n
        self.next_step_on_gpu = False
        return n

    def replay_step_words(self) -> list:
        """The step parameters that run the last fed position again (it rewrites its own KV row, moves nothing), for
        a benchmark that writes them into the step buffer itself, which then no longer holds what a queued step's
        argmax left there."""
        self.next_step_on_gpu = False
        pos = max(self.pos - 1, 0)
        return [0, pos, pos + 1, 0]

    def _check_tokens(self, tokens):
        for t in tokens:
            if not 0 <= t < self.n_vocab:
                raise ValueError(f"token id {t} outside the vocabulary (0..{self.n_vocab - 1})")
        if self.pos + len(tokens) > self.cache.n_ctx:
            raise ContextFull(f"context is full: {self.pos} + {len(tokens)} tokens > {self.cache.n_ctx} positions")

    def attach_prefill(self, chunk: int):
        """Record the batched prefill of `chunk` tokens (1: prompts go token by token through the token's list)."""
        if chunk < 1:
            raise ValueError(f"prefill chunk {chunk}: give 1 (token by token) or more")
        self.prefill = Prefill.build(self, chunk) if chunk > 1 else None
        self.stats["prefill_chunk"] = chunk
        if self.prefill is not None:
            self.stats["prefill_flops_per_token"] = self.prefill.flops_per_token
            self.stats["prefill_dispatches"] = self.prefill.dl.count

    def feed(self, tokens) -> None:
        """Enqueue tokens whose logits are not needed (the prompt but its last token): no readback, no await."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            return
        self._check_tokens(tokens)
        t0 = time.perf_counter()
        self.next_step_on_gpu = False
        if self.prefill is not None and len(tokens) > 1:
            self.stats["ffi_calls"] += 3 * self.prefill.feed(tokens, self.pos)  # 2 writeBuffers + replay per chunk
            self.pos += len(tokens)
            self.stats["tokens"] += len(tokens)
            self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3
            return
        helper().feed(self.gpu.device, self.step_buf, tokens, self.pos, self.dl.ops)
        self.stats["ffi_calls"] += 2  # .feed and the call (JS reads the ids back through a PyProxy)
        self.pos += len(tokens)
        self.stats["tokens"] += len(tokens)
        self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3

    async def step(self, token: int) -> array.array:
        """Feed one token at the next position; returns its logits (f32, n_vocab)."""
        logits = array.array("f")
        logits.frombytes(await self._step_read(token, self.acts["logits"], self.staging, 4 * self.n_vocab))
        return logits

    async def step_argmax(self, token: int) -> tuple:
        """Feed one token; returns (id, logit) of its largest logit (ties to the lower id), computed on the GPU:
        greedy decoding reads back 8 bytes instead of the whole logits row (1 MB at a 248k vocabulary)."""
        return struct.unpack("<If", await self._step_read(token, self.acts["argmax"], self.argmax_staging, 8))

    # --- greedy steps queued ahead of their readback ----------------------------------------------------------
    chains = True  # launch_argmax is available (a decoder whose token needs the CPU between layers says False)

    def launch_argmax(self, token=None):
        """Queue one greedy step without waiting for it: `token` at the next position, or with token None the
        argmax of the step queued before it, taken on the GPU (no readback in between). Returns a handle for
        collect_argmax. At most STEPS_IN_FLIGHT steps may be in flight (a staging buffer each takes their results):
        collect the oldest before launching another. While the GPU runs one step the CPU encodes the next, so a greedy
        decode paces at the slower of the two instead of their sum."""
        if token is not None:
            self._check_tokens([token])
        elif self.pos == 0:
            raise ValueError("launch_argmax(None) needs a previous step whose argmax it feeds")
        if self.pos >= self.cache.n_ctx:
            raise ContextFull(f"position {self.pos} is past the context ({self.cache.n_ctx} positions)")
        return self._launch(token, self.dl.ops)

    def _launch(self, token, ops, advance=True, k=1):
        """launch_argmax's queueing of `ops` (the token's list, or with advance False the output head over a token
        the chunks fed: Prefill.head); with k > 1 the run of k tokens of launch_argmax_run."""
        if len(self._in_flight) >= STEPS_IN_FLIGHT:
            raise RuntimeError(f"{STEPS_IN_FLIGHT} greedy steps are in flight: collect_argmax the oldest one first")
        t0 = time.perf_counter()
        ring = next(i for i in range(STEPS_IN_FLIGHT) if i not in self._in_flight)  # one no uncollected step maps
        argmax = self.acts["argmax"]
        pos = self.pos if advance else self.pos - 1
        ts = self.step_stamps() if self.step_stamps is not None else None
        # the step launched before this one left this one's parameters in the step buffer (its argmax's dispatch):
        # no writeBuffer and no copy of the id between the two tokens
        words_on_gpu = token is None and advance and self.next_step_on_gpu
        words = None if words_on_gpu else [0 if token is None else token, pos, pos + 1, int(self.kern.advance_step)]
        token_from = None if token is not None or words_on_gpu else argmax
        # one submit: the GPU has the step queued before this one to run while this is encoded, so pieces
        # (splitEvery) would only add submit boundaries (~40 µs a token on an H100,
        # docs/results/2026-12-05-h100-queued-submit.json)
        promise = helper().step(self.gpu.device, self.step_buf, words, ops, argmax, 0, self.argmax_stagings[ring], 8,
                                token_from, ts, True, k)
        self.next_step_on_gpu = self.kern.advance_step
        self._in_flight.append(ring)
        self.stats["ffi_calls"] += 2  # .step + call
        if advance:
            self.pos += k
            self.stats["tokens"] += k
        self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3
        return StepHandle(promise, ring, pos, k)

    def launch_argmax_run(self, k: int, token=None):
        """Queue k greedy steps in one submit without waiting for them (a benchmark's form: the submit, the map and
        the await shared by k tokens; generation queues one step at a time, so a stop never has more than one step
        past it): the first feeds `token` at the next position, or with token None the argmax of the step queued
        before it, and each of the others the argmax of the one before, on the GPU. Counts as one step in flight;
        returns a handle for collect_argmax_run."""
        if not 1 <= k <= MAX_TOKENS_PER_SUBMIT:
            raise ValueError(f"tokens per submit: {k} (1 to {MAX_TOKENS_PER_SUBMIT})")
        if not self.kern.advance_step:
            raise ValueError("queued runs need the argmax to write the next step's parameters (advance_step)")
        if token is not None:
            self._check_tokens([token])
        elif self.pos == 0:
            raise ValueError("launch_argmax_run(k, None) needs a previous step whose argmax it feeds")
        if self.pos + k > self.cache.n_ctx:
            raise ContextFull(f"positions {self.pos} + {k} are past the context ({self.cache.n_ctx} positions)")
        return self._launch(token, self.dl.ops, k=k)

    async def collect_argmax_run(self, handle) -> list:
        """[(id, logit)] of the k steps of a launched run (launch_argmax_run), awaited; in launch order with the
        single steps."""
        data = await self._collect(handle)
        return [struct.unpack_from("<If", data, 8 * j) for j in range(handle.k)]

    async def collect_argmax(self, handle) -> tuple:
        """(id, logit) of a launched step (launch_argmax), awaited; steps are collected in launch order."""
        return struct.unpack("<If", await self._collect(handle))

    async def _collect(self, handle) -> bytes:
        """The bytes a launched step or run (_launch) read back, awaited; in launch order."""
        promise, ring, pos, k = handle.promise, handle.ring, handle.pos, handle.k
        if not self._in_flight or self._in_flight[0] != ring:
            raise RuntimeError("collect_argmax: steps are collected in the order they were launched")
        t0 = time.perf_counter()
        try:
            data = (await promise).to_bytes()
        finally:
            self._in_flight.pop(0)
        self.stats["syncs"] += 1
        self.stats["ffi_calls"] += 3  # .to_bytes + call, check_errors' errs.length
        self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3
        check_errors(self.gpu, f"token at position {pos}" if k == 1 else f"tokens at positions {pos} .. {pos + k - 1}")
        return data

    async def _step_read(self, token: int, out, staging, nbytes: int, head: bool = False) -> bytes:
        """One token through the recorded list, then the first nbytes of `out` read back (one sync). head: the
        token at pos - 1 was fed through the chunks already; only the output head runs (Prefill.head)."""
        if not head:
            self._check_tokens([token])
        t0 = time.perf_counter()
        pos = self.pos - 1 if head else self.pos
        self.next_step_on_gpu = False
        data = await helper().step(self.gpu.device, self.step_buf, [token, pos, pos + 1, 0],
                                   self.prefill.head.ops if head else self.dl.ops, out, 0, staging, nbytes)
        data = data.to_bytes()
        self.stats["syncs"] += 1
        self.stats["ffi_calls"] += 5  # .step + call, .to_bytes + call, check_errors' errs.length
        if not head:
            self.pos += 1
            self.stats["tokens"] += 1
        self.stats["step_ms_total"] += (time.perf_counter() - t0) * 1e3
        check_errors(self.gpu, f"token at position {pos}")
        return data

    # --- a prompt: feed(ids[:-1]) then a step of ids[-1], or the whole prompt through the chunks -----------------
    # whether Prefill records its output head for prompts fed whole; a decoder whose feed needs the CPU between
    # layers (StoreDecoder) says False
    whole_prompts = True

    def _feed_prompt(self, ids) -> bool:
        """Feeds the prompt but what the step after it runs: with a batched prefill every token, the last one's
        logits then coming from the chunk's last row through the output head alone (True); else all but the last
        (False)."""
        if not ids:
            raise ValueError("a prompt needs at least one token")
        if self.prefill is not None and self.prefill.head is not None and len(ids) > 1:
            self.feed(ids)
            self.stats["whole_prompts"] += 1
            return True
        self.feed(ids[:-1])
        return False

    async def step_prompt(self, ids) -> array.array:
        """The prompt fed; returns its last token's logits (as feed(ids[:-1]) then step(ids[-1]))."""
        if not self._feed_prompt(ids):
            return await self.step(ids[-1])
        logits = array.array("f")
        logits.frombytes(await self._step_read(ids[-1], self.acts["logits"], self.staging, 4 * self.n_vocab, True))
        return logits

    async def step_prompt_argmax(self, ids) -> tuple:
        """The prompt fed; returns (id, logit) of its last token's largest logit (as step_argmax)."""
        if not self._feed_prompt(ids):
            return await self.step_argmax(ids[-1])
        return struct.unpack("<If", await self._step_read(ids[-1], self.acts["argmax"], self.argmax_staging, 8, True))

    def launch_prompt_argmax(self, ids):
        """The prompt fed, its last token's greedy step queued (as launch_argmax(ids[-1])); a handle for
        collect_argmax."""
        if len(self._in_flight) >= STEPS_IN_FLIGHT:  # refused before anything is fed
            raise RuntimeError(f"{STEPS_IN_FLIGHT} greedy steps are in flight: collect_argmax the oldest one first")
        if not self._feed_prompt(ids):
            return self.launch_argmax(ids[-1])
        return self._launch(0, self.prefill.head.ops, advance=False)

    def release(self):
        if self.prefill is not None:
            self.prefill.release()
        if self.checkpoints is not None:
            self.checkpoints.release()
        self.loader.release()
        self.acts.release()
        self.cache.release()
        self.slot_map.destroy()
        self.step_buf.destroy()
        self.staging.destroy()
        if getattr(self, "argmax_staging", None) is not None:
            self.argmax_staging.destroy()
        for b in getattr(self, "argmax_stagings", ()):
            b.destroy()

    def summary(self) -> dict:
        s = dict(self.stats)
        s["ms_per_token"] = s["step_ms_total"] / s["tokens"] if s["tokens"] else None
        s["tokens_per_s"] = 1e3 / s["ms_per_token"] if s["ms_per_token"] else None
        return s
