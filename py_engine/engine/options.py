"""What a caller chooses when opening a decoder: one options object instead of a long parameter list.

    Decoder.open(path, gpu, pipelines, options=DecodeOptions(n_ctx=4096))
    StoreDecoder.open_store(sink, gpu, pipelines, options=StoreOptions(budget_bytes=8 << 30, prefetch_depth=1))

Both also take the fields as keywords (`Decoder.open(path, n_ctx=256)`), which override `options`.
"""
from dataclasses import dataclass, fields, replace

ROUTINGS = ("auto", "early_stop", "per_layer")
GUESSES = ("lookahead", "previous")  # what prefetch guesses: the router look-ahead, or the previous token's picks
CPU_PLACES = ("cost", "all")  # which misses the CPU expert tier takes (residency/cpu_tier_placement.py)
LOOKAHEAD_SOURCES = ("h", "xn")  # the router look-ahead's input (lookahead.py says why each)


@dataclass(frozen=True)
class DecodeOptions:
    n_ctx: int = 2048  # positions of the KV cache (capped at the model's trained context)
    kv_format: str = "f16"  # "f16" (packed in u32) or "f32"
    lane_cap: int = 16  # most lanes a matvec row uses (kernels.py)
    prefill_chunk: int = None  # prompt tokens per batched prefill chunk; None: per device (decoder.py); 1: none
    # Q8_0 products quantise their input per 32-block as llama.cpp does (int8 dot products, the default); False
    # keeps activations f32 (a check of the kernels' arithmetic against the numpy reference)
    q8_act: bool = True
    # copies of the recurrent state kept at turn boundaries (checkpoints.py; models without recurrent layers keep
    # none): a follow-up resumes from one instead of prefilling the whole conversation again
    state_checkpoints: int = 4
    # told (done bytes, total bytes) as the weights reach the GPU during the load, ~10 times a second (upload_meter.py)
    upload_progress: object = None

    def validate(self):
        if self.state_checkpoints < 0:
            raise ValueError(f"state checkpoints {self.state_checkpoints}: give 0 (none) or more")
        if self.kv_format not in ("f16", "f32"):
            raise ValueError(f"KV cache format {self.kv_format!r}: use f16 or f32")
        if self.prefill_chunk is not None and self.prefill_chunk < 1:
            raise ValueError(f"prefill chunk {self.prefill_chunk}: give 1 (token by token) or more")
        return self

    @classmethod
    def make(cls, options=None, **overrides):
        """`options` (or the defaults) with the keyword fields given replacing theirs; checked."""
        base = options if options is not None else cls()
        if not isinstance(base, cls):
            raise TypeError(f"options must be a {cls.__name__}, got {type(base).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
        return replace(base, **overrides).validate()


@dataclass(frozen=True)
class StoreOptions(DecodeOptions):
    budget_bytes: object = None  # GPU bytes (int), "min" (the smallest the model runs in) or None (every expert)
    pool_fraction: float = None  # slots for this share of all experts, as long as the budget holds them
    max_pool_buffer: int = None  # largest expert pool buffer in bytes (None: the device's binding limit)
    upload: str = "staging"  # expert uploads through a ring of mapped buffers, or "writebuffer" (expert_pool.py)
    ring_buffers: int = 4
    policy: str = "lru"  # expert eviction policy (residency/expert_streamer.py)
    routing: str = "auto"  # with a partial pool: "auto", "early_stop" or "per_layer" (store_decoder.py)
    auto_threshold: float = 0.25  # "auto" stops early while fewer than this share of layers missed recently
    # on a stop at layer L (early stop) or L's ids read back (per-layer), prefetch guesses for layers L+1 .. L+depth:
    # the router look-ahead's (lookahead_source "h" or "xn") or what those layers picked for the previous token
    prefetch_depth: int = 0
    prefetch_guess: str = "lookahead"
    lookahead_source: str = "h"
    prefetch_wait: bool = False  # an early stop resumes only once layer L+1's guessed experts are in
    # CPU expert tier (engine/cpu_tier_path.py): N CPU workers compute the misses the cost model places there
    # ("cost"; "all": every miss it can) in per-layer routing, at most cpu_tier_max a layer (None: top-k); 0: off.
    # cpu_tier_url: where web/cpu_tier/pool.js is (default: /cpu_tier/pool.js beside the page; Node: a file URL)
    cpu_tier: int = 0
    cpu_tier_place: str = "cost"
    cpu_tier_max: int = None
    cpu_tier_url: str = None
    # the token table's rows on demand through a row cache of this many slots (engine/embedding_rows.py): None lets
    # the memory planner choose (rows on demand under a tight budget), 0 keeps the table resident
    embedding_rows: int = None

    def validate(self):
        super().validate()
        if self.embedding_rows is not None and (not isinstance(self.embedding_rows, int) or self.embedding_rows < 0):
            raise ValueError(f"embedding_rows {self.embedding_rows!r}: give the row cache's slots, 0 to keep the "
                             "token table resident, or None to let the budget decide")
        for name, value, allowed in (("routing", self.routing, ROUTINGS), ("prefetch_guess", self.prefetch_guess,
                                     GUESSES), ("lookahead_source", self.lookahead_source, LOOKAHEAD_SOURCES)):
            if value not in allowed:
                raise ValueError(f"{name} {value!r}: use one of {', '.join(allowed)}")
        if self.cpu_tier < 0:
            raise ValueError(f"cpu_tier {self.cpu_tier}: give the number of CPU workers, or 0 for none")
        if self.cpu_tier and self.routing == "early_stop":
            raise ValueError("the CPU expert tier needs per-layer routing (routing 'per_layer' or 'auto')")
        if self.cpu_tier_max is not None and self.cpu_tier_max < 1:
            raise ValueError(f"cpu_tier_max {self.cpu_tier_max}: give at least 1 expert per layer, or None")
        if self.cpu_tier_place not in CPU_PLACES:
            raise ValueError(f"cpu_tier_place {self.cpu_tier_place!r}: use one of {', '.join(CPU_PLACES)}")
        return self
