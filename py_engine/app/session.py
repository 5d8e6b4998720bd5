"""The worker's one chat session: the loaded model (GPU decoder, tokenizer, generator) and what the page asks of it.

One model at a time; loading another releases the first. A reply can be stopped while it runs (the worker handles
the `stop` message between two tokens, since every token awaits the GPU), and what was generated is kept. The
WebGPU device is opened once and reused; when the browser reports it lost, the next request says so and a new
Load opens a fresh one.

The GPU modules (py_engine.gpu, py_engine.engine) import `js`, so they are imported where used: this module also
imports under CPython, which the boot request table needs.
"""
import os
import time

from ..generation import AbortFlag, SamplingParams
from ..gguf import GGUFError, read_gguf_file
from .errors import BadModelFile, Busy, DeviceLost, NoModelLoaded, budget_too_small
from .gpu_need import fmt_bytes
from .progress import no_progress

DEFAULT_N_CTX = 4096
ROLES = ("system", "user", "assistant")
SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "frequency_penalty",
                   "presence_penalty", "seed")


class LoadedModel:
    def __init__(self, name, header, decoder, tokenizer, backend, generator, load_info):
        self.name, self.header, self.decoder = name, header, decoder
        self.tokenizer, self.backend, self.generator = tokenizer, backend, generator
        self.load_info = load_info

    @property
    def arch(self):
        return self.backend.arch


class Session:
    def __init__(self, storage=None, store_lock=None):
        """storage: a callable giving the model store (py_engine/store: OPFSStorage in the browser) or None when
        there is none; store_lock: an async context manager factory serialising ingests of one folder (a Web Lock
        in the browser)."""
        self.storage = storage or (lambda: None)
        self.store_lock = store_lock
        self.gpu = None
        self.pipelines = None
        self.lost = None  # why the device was lost, once it was
        self.model = None
        self._abort = None  # the running reply's AbortFlag
        self._loading = False
        self.last = None  # the last reply's stats
        self._pipeline_specs = None  # the running Load's list of pipelines to compile first (gpu_setup.py)
        self._cpu_workers = 0  # the running Load's CPU expert workers (store path; 0: off)
        self._setup_info = None
        self._weights_reporter = None  # tells the running Load's weights upload to the page (gpu_setup.py)
        self.replies = 0

    # --- the device -----------------------------------------------------------------------------------------------
    async def _gpu(self):
        if self.gpu is not None and self.lost is None:
            return self.gpu
        from ..gpu.device import open_gpu
        from ..gpu.pipelines import Pipelines
        from .gpu_setup import ReportingPipelines

        self.gpu = await open_gpu()
        self.pipelines = ReportingPipelines(Pipelines(self.gpu))
        self.lost = None
        self._watch_lost(self.gpu)
        return self.gpu

    def _watch_lost(self, gpu):
        try:
            from pyodide.ffi import create_once_callable
        except ImportError:
            return

        def on_lost(info):
            if gpu is self.gpu:
                self.lost = f"{getattr(info, 'reason', 'unknown')}: {getattr(info, 'message', '') or 'no message'}"

        lost = getattr(gpu.device, "lost", None)
        if lost is not None:
            lost.then(create_once_callable(on_lost))

    def _check_device(self):
        if self.lost is not None:
            self._drop_model(release=False)
            raise DeviceLost(f"the GPU device was lost ({self.lost}); press Load to start the model again")

    # --- load / unload --------------------------------------------------------------------------------------------
    def _require_model(self) -> LoadedModel:
        self._check_device()
        if self.model is None:
            raise NoModelLoaded()
        return self.model

    def _drop_model(self, release=True):
        m, self.model = self.model, None
        if m is not None and release:
            m.decoder.release()

    def unload(self):
        if self._abort is not None:
            raise Busy("a reply is being generated: stop it before unloading the model")
        self._drop_model()

    async def load(self, source: dict, options: dict = None, progress=no_progress) -> dict:
        """Load a model. source: {kind: 'served' | 'url' | 'file' | 'stored' | 'path', name | url | file | path};
        options: {budget_bytes, n_ctx, kv: 'f16' | 'f32', path: 'store' | 'direct', cpu_tier: CPU expert workers
        of the store path (0: off)}. Progress events:
        {stage: 'header' | 'verify' | 'download' | 'stored' | 'gpu' | 'ready', message, bytes, total, rate, eta}
        ('stored': the store already held it complete, nothing was downloaded)."""
        options = dict(options or {})
        source = dict(source or {})
        if self._abort is not None:
            raise Busy("a reply is being generated: stop it before loading a model")
        if self._loading:
            raise Busy("a model is already loading")
        n_ctx = int(options.get("n_ctx") or DEFAULT_N_CTX)
        kv = options.get("kv") or "f16"
        budget = options.get("budget_bytes")
        cpu_workers = options.get("cpu_tier") or 0
        mode = "store" if source.get("kind") == "stored" else options.get("path") or (
            "store" if self.storage() is not None else "direct")
        if n_ctx < 16:
            raise ValueError(f"context size {n_ctx} is too small (at least 16 tokens)")
        if kv not in ("f16", "f32"):
            raise ValueError(f"KV cache format {kv!r}: use f16 or f32")
        if mode not in ("store", "direct"):
            raise ValueError(f"load path {mode!r}: use 'store' or 'direct'")
        if not isinstance(cpu_workers, int) or not 0 <= cpu_workers <= 64:
            raise ValueError(f"CPU expert workers {cpu_workers!r}: use a whole number from 0 (off) to 64")
        self._loading = True
        self._pipeline_specs = options.get("pipeline_specs")
        self._cpu_workers = cpu_workers
        t0 = time.perf_counter()
        try:
            # the loaded model stays until the new one has passed every check that needs no GPU (header, tokenizer,
            # budget, download): a wrong file or a failed download leaves the working model as it was
            progress({"stage": "header", "message": "reading the model header"})
            if mode == "store":
                name, header, decoder = await self._load_store(source, n_ctx, kv, budget, progress)
            else:
                name, header, decoder = await self._load_direct(source, n_ctx, kv, budget, progress)
            model = self._wrap(name, header, decoder)
            plan = getattr(decoder, "plan", None)
            model.load_info = {"name": name, "arch": model.arch, "n_ctx": model.backend.n_ctx, "kv": kv,
                               "vocab_size": model.backend.vocab_size, "gpu_bytes": model.backend.gpu_bytes(),
                               "budget_bytes": budget, "path": mode,
                               "experts": ("resident" if plan is None or plan.full else "streamed"),
                               "pool": plan.to_dict() if plan is not None else None,
                               # the store engine's token table: resident, or its rows on demand (and why)
                               "embedding": decoder.stats.get("embedding"),
                               "load_seconds": time.perf_counter() - t0,
                               "gpu_setup": dict(self._setup_info or {}, pipelines_compiled=self.pipelines.compiled,
                                                 weights_bytes=decoder.stats.get("weights_bytes")),
                               "pipeline_specs": self.pipelines.specs(),
                               "adapter": self.gpu.info.get("description") or self.gpu.info.get("vendor")}
            self.model = model
            progress({"stage": "ready", "message": f"{name} is ready"})
            return model.load_info
        finally:
            self._loading = False
            if self.pipelines is not None:
                self.pipelines.end()

    async def _load_direct(self, source, n_ctx, kv, budget, progress):
        """The whole GGUF into the worker's memory, every expert resident (see direct_fetch.py)."""
        from ..engine.decoder import Decoder
        from . import direct_fetch
        from .gpu_need import gpu_need

        src, tmp = None, None
        if source.get("kind") == "path":  # headless runs: a file the engine's own file system can open
            path = source.get("path") or ""
            try:
                header = read_gguf_file(path)
            except (GGUFError, OSError) as e:
                raise BadModelFile("not a usable GGUF file: choose a .gguf model file", str(e)) from None
            name = os.path.basename(path)
        else:
            src = await direct_fetch.open_source(source)
            header = await direct_fetch.read_header(src)
            name = direct_fetch.source_name(source, src)
        try:
            need = gpu_need(header, n_ctx, kv)
        except ValueError as e:
            raise unsupported(name, e) from None
        self._check_tokenizer(name, header)
        if budget is not None and need.total > int(budget):
            raise budget_too_small(name, need.total, int(budget), (
                f"with every expert resident: weights {fmt_bytes(need.weights)}, KV cache "
                f"{fmt_bytes(need.kv_cache)} for {need.n_ctx} tokens, activations {fmt_bytes(need.activations)}"))
        if src is not None:
            tmp = direct_fetch.mem_path(name)
            await direct_fetch.fetch_to_file(src, tmp, progress)
            path = tmp
        try:
            self._drop_model()  # the GPU memory goes to the new model from here
            gpu = await self._gpu_setup(progress)
            decoder = await Decoder.open(path, gpu, self.pipelines, n_ctx=n_ctx, kv_format=kv,
                                         upload_progress=self._weights_reporter)
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)  # every weight is on the GPU now: free the wasm memory
        return name, header, decoder

    async def _load_store(self, source, n_ctx, kv, budget, progress):
        """Ingest into the model store unless it is there already, then run from the store (store_load.py)."""
        from . import direct_fetch, store_load

        storage = self.storage()
        if storage is None:
            raise BadModelFile("no model store here (OPFS is unavailable in this browser or window); "
                               "load with the direct path instead")
        if source.get("kind") == "stored":
            folder = store_load.folder_name(source.get("name") or "")
            if folder not in await storage.models():
                raise BadModelFile(f"no stored model named {folder!r}")
            name = folder
            from ..store.manifest import load_manifest
            store_load.stored_progress(progress, await load_manifest(storage.sink(folder)))
        else:
            if source.get("kind") == "path":
                from ..store.local import FileSource
                src = FileSource(source.get("path") or "")
            else:
                src = await direct_fetch.open_source(source)
            header = await direct_fetch.read_header(src)  # refuse a wrong file before storing anything
            name = direct_fetch.source_name(source, src)
            folder = store_load.folder_name(name)
            from .gpu_need import gpu_need
            try:
                gpu_need(header, n_ctx, kv)  # the architecture check
            except ValueError as e:
                raise unsupported(name, e) from None
            self._check_tokenizer(name, header)
            # a pinned source carries its sha256: the ingest checks it (else it records the hash it computed)
            await store_load.ingest_into(storage, folder, src, progress, self.store_lock,
                                         expected_sha256=source.get("sha256") or None)
        self._drop_model()  # the GPU memory goes to the new model from here
        gpu = await self._gpu_setup(progress)
        header, decoder = await store_load.open_stored(storage, folder, gpu, self.pipelines, n_ctx, kv, budget,
                                                       cpu_tier=self._cpu_workers,
                                                       upload_progress=self._weights_reporter)
        return name, header, decoder

    async def _gpu_setup(self, progress):
        """The device, then the pipelines a previous Load of this model used (compiled in parallel); the decoder's
        own set-up reports each pipeline it still compiles (gpu_setup.py)."""
        from .gpu_setup import WeightsReporter, compiling_reporter, set_up_pipelines

        progress({"stage": "gpu", "step": "device", "message": "opening the GPU"})
        gpu = await self._gpu()
        t0 = time.perf_counter()
        prepared = await set_up_pipelines(self.pipelines, self._pipeline_specs, progress)
        self._setup_info = {"pipelines_prepared": prepared, "prepare_seconds": time.perf_counter() - t0}
        progress({"stage": "gpu", "step": "weights", "message": "uploading weights"})
        self._weights_reporter = WeightsReporter(progress)
        self.pipelines.begin(compiling_reporter(progress))
        return gpu

    @staticmethod
    def _check_tokenizer(name, header):
        from ..tokenizer import Tokenizer
        try:
            return Tokenizer.from_gguf_metadata(header.metadata)
        except (KeyError, ValueError) as e:
            raise BadModelFile(f"{name}: its tokenizer cannot be read; choose another model file", str(e)) from None

    def _wrap(self, name, header, decoder) -> LoadedModel:
        from ..engine.gpu_backend import GpuBackend
        from ..generation import Generator

        tokenizer = self._check_tokenizer(name, header)
        backend = GpuBackend(decoder)
        return LoadedModel(name, header, decoder, tokenizer, backend, Generator(backend, tokenizer, backend.arch),
                           None)

    # --- replies --------------------------------------------------------------------------------------------------
    async def generate(self, messages, thinking=False, sampling=None, max_tokens=None, progress=no_progress) -> dict:
        """One reply; every shown piece is posted as {stage: 'delta', kind: 'delta', channel, text}."""
        m = self._require_model()
        if self._abort is not None:
            raise Busy("a reply is already being generated; stop it or wait for it")
        msgs = clean_messages(messages)
        params = sampling_params(sampling)
        if max_tokens is not None:
            max_tokens = int(max_tokens)
        flag = AbortFlag()
        self._abort = flag

        def on_delta(d):
            # n_cached: the tokens in the model's context now, from which the page shows live tokens/s
            progress({"stage": "delta", "kind": "delta", "channel": d.kind, "text": d.text,
                      "n_cached": m.backend.n_cached})

        try:
            result = await m.generator.generate(msgs, thinking=bool(thinking), max_tokens=max_tokens,
                                                sampling=params, on_delta=on_delta, abort=flag)
        except Exception:
            self._check_device()  # a lost device explains the failure better than whatever broke
            raise
        finally:
            self._abort = None
        stats = result.stats.as_dict()
        stats.update(self._gpu_stats(m))
        self.last = stats
        self.replies += 1
        return {"text": result.text, "thinking": result.thinking, "stop_reason": result.stop_reason,
                "message": result.message, "token_ids": list(result.token_ids), "stats": stats}

    def stop(self) -> dict:
        """Stop the running reply after its current token (its text is kept); nothing running is not an error."""
        if self._abort is None:
            return {"stopped": False}
        self._abort.abort()
        return {"stopped": True}

    def reset(self) -> dict:
        """A new chat: the model stays loaded, its cached conversation is forgotten."""
        if self._abort is not None:
            raise Busy("a reply is being generated: stop it before starting a new chat")
        if self.model is not None:
            self.model.generator.reset()
        return {"reset": True}

    def _gpu_stats(self, m) -> dict:
        d = m.decoder.summary()
        streamer = d.get("streamer")  # the store engine's expert streamer (absent: every expert resident)
        streamed = streamer is not None and d.get("mode") == "partial"
        readers = getattr(getattr(m.decoder, "reader", None), "pool", None)
        rows = d.get("embedding_rows")  # the token table's row cache, when its rows come on demand
        return {"gpu_bytes": m.backend.gpu_bytes(), "weights_bytes": d.get("weights_bytes"),
                "embedding_row_hit_rate": rows.get("hit_rate") if rows else None,
                "kv_bytes": d.get("kv_bytes"), "ms_per_token": d.get("ms_per_token"),
                "experts": "streamed" if streamed else "resident",
                "expert_hit_rate": streamer.get("hit_rate") if streamed else None,
                "bytes_read_per_token": streamer.get("bytes_per_token") if streamed else None,
                # reads of missed records in flight at once: the browser's reader workers (store_load.parallel_reader)
                "expert_read_workers": len(readers.workers) if streamed and readers is not None else None,
                **streamed_rates(d, streamer if streamed else None),
                "n_cached": m.backend.n_cached, "n_ctx": m.backend.n_ctx}

    def stats(self) -> dict:
        if self.lost is not None:
            return {"loaded": None, "device_lost": self.lost}
        if self.model is None:
            return {"loaded": None, "last": self.last, "replies": self.replies}
        m = self.model
        return {"loaded": m.name, "arch": m.arch, "model": m.load_info, "last": self.last,
                "replies": self.replies, "generating": self._abort is not None, **self._gpu_stats(m)}


def streamed_rates(summary: dict, streamer) -> dict:
    """The miss path's figures since the load: the share of misses computed on the CPU (None: the tier is off) and
    the rates of the record reads (the streamer's and the CPU tier's) and of the GPU uploads, in bytes a second of
    the time spent in each (reads in flight at once each count their own time)."""
    if streamer is None:
        return {"cpu_share_of_misses": None, "read_bytes_per_s": None, "upload_bytes_per_s": None}
    tier = summary.get("cpu_tier")
    read_bytes = streamer.get("bytes_read", 0) + (tier["bytes_read"] if tier else 0)
    read_ms = streamer.get("read_ms", 0.0) + (tier["read_ms"] if tier else 0.0)
    upload_ms = streamer.get("upload_ms", 0.0)  # every record the streamer read is uploaded into its slot
    return {"cpu_share_of_misses": tier["share_of_misses"] if tier else None,
            "read_bytes_per_s": read_bytes / (read_ms / 1e3) if read_ms > 0 else None,
            "upload_bytes_per_s": streamer.get("bytes_read", 0) / (upload_ms / 1e3) if upload_ms > 0 else None}


def unsupported(name, err) -> BadModelFile:
    return BadModelFile(f"{name} is a model this engine does not run: choose a Qwen3 MoE, Qwen3.5/3.6 MoE or Gemma 4 "
                        "26B-A4B GGUF", str(err))


def clean_messages(messages) -> list:
    """The conversation as the template wants it; anything else is refused with a clear message."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError("generate needs a non-empty list of messages")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ROLES:
            raise ValueError(f"message {i}: expected {{role: {'|'.join(ROLES)}, content}}, got {msg!r:.80}")
        content = msg.get("content")
        if not isinstance(content, str):
            raise ValueError(f"message {i}: content must be text")
        clean = {"role": msg["role"], "content": content}
        if msg["role"] == "assistant" and isinstance(msg.get("reasoning_content"), str):
            clean["reasoning_content"] = msg["reasoning_content"]
        out.append(clean)
    if out[-1]["role"] != "user":
        raise ValueError("the last message must be the user's")
    return out


def sampling_params(sampling) -> SamplingParams:
    """SamplingParams from the page's settings (missing fields keep llama.cpp's defaults; temperature 0 = greedy)."""
    if not sampling:
        return SamplingParams()
    unknown = sorted(set(sampling) - set(SAMPLING_FIELDS))
    if unknown:
        raise ValueError(f"unknown sampling settings: {', '.join(unknown)} (known: {', '.join(SAMPLING_FIELDS)})")
    kw = {k: v for k, v in sampling.items() if v is not None}
    for k in ("top_k", "repeat_last_n", "seed"):
        if isinstance(kw.get(k), float) and kw[k].is_integer():
            kw[k] = int(kw[k])  # JS numbers arrive as floats
    return SamplingParams(**kw)
