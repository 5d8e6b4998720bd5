"""The memory-plan step of opening a store decoder: before anything is uploaded, how the GPU budget splits into the
dense planes, KV cache and recurrent state, work buffers (activations, stagings, early-stop arguments, look-ahead,
the prefill chunk) and the expert pool (budget.py), and which prefill chunk fits.
"""
from dataclasses import dataclass

from ..models.cache import STATE_BUFFERS, kv_cache_bytes, layer_kv_cache_bytes
from .budget import BudgetInputs, BudgetPlan, min_pool_bytes, plan_budget
from .checkpoints import checkpoint_bytes
from .decoder import default_prefill_chunk
from .embedding_rows import EmbeddingAsk, EmbeddingChoice, plan_embedding_rows, table_planes, why_resident
from .expert_pool import MAX_TOP_K, ExpertPool
from .lookahead import RouterLookAhead
from .prefill import chunk_bytes
from .store_weights import dense_gpu_bytes


def _round4(n: int) -> int:
    return (n + 3) & ~3

GUARD_DISPATCHES_PER_LAYER = 48  # qwen3moe records 14 per layer, qwen35moe ~25 (+ 3 per pool buffer)
# The prefill chunk's work buffers take at most this share of a GPU budget: a small budget keeps its bytes for the
# dense weights and the expert slots (the chunk halves until it fits, down to MIN_FITTED_CHUNK).
PREFILL_BUDGET_SHARE = 1 / 8
MIN_FITTED_CHUNK = 16
# The recurrent state's checkpoints (checkpoints.py) take at most this share of a GPU budget: fewer are kept (down to
# none: a diverging follow-up then prefills the conversation again) where the budget is small.
CHECKPOINT_BUDGET_SHARE = 1 / 16


def guard_args_allowance(n_layers, all_experts_bytes, gpu, max_pool_buffer=None, extra_per_layer=0) -> int:
    """Upper bound of the early-stop indirect arguments (two copies, 12 B per dispatch), before the token is
    recorded: at most GUARD_DISPATCHES_PER_LAYER dispatches per layer besides 3 per pool buffer (and the
    look-ahead's `extra_per_layer`)."""
    limit = min(gpu.max_binding, int(gpu.limits["maxBufferSize"]), max_pool_buffer or gpu.max_binding)
    buffers = -(-all_experts_bytes // max(1, limit)) + 1
    return 24 * (n_layers * (GUARD_DISPATCHES_PER_LAYER + 3 * buffers + extra_per_layer) + 16)


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


def fit_checkpoints(model, count: int, budget_bytes, rest: int, ring_bytes: int = 0) -> int:
    """The state checkpoints a store engine keeps under `budget_bytes`: `count`, fewer while they would take more
    than CHECKPOINT_BUDGET_SHARE of the budget or not fit beside `rest`. ring_bytes: what each also copies of the
    model's K/V rings (checkpoints.state_sources)."""
    if not isinstance(budget_bytes, int) or isinstance(budget_bytes, bool):
        return count

    def size(n):
        return checkpoint_bytes(model, n) + n * ring_bytes
    while count > 0 and (size(count) > CHECKPOINT_BUDGET_SHARE * budget_bytes or rest + size(count) > budget_bytes):
        count -= 1
    return count


@dataclass(frozen=True)
class MemoryPlan:
    budget: BudgetPlan  # the split, and the expert pool's layout
    n_ctx: int  # positions of the KV cache (capped at the model's trained context)
    prefill_chunk: int
    state_bytes: int  # recurrent state kept across tokens (counted with the KV cache)
    lookahead: bool  # the router look-ahead guesses what to prefetch
    lookahead_dispatches: int  # its dispatches per layer (for the early-stop arguments)
    guard_allowance: int  # bytes of early-stop indirect arguments the budget holds
    checkpoints: int = 0  # copies of the recurrent state kept at turn boundaries (counted with the KV cache)
    # the token table resident, or its rows on demand through a row cache (embedding_rows.py; counted: the table's
    # planes out of `dense`, the cache in `work`)
    embedding: EmbeddingChoice = None

    @property
    def full(self) -> bool:
        return self.budget.full


def model_kv_bytes(model, n_ctx: int, kv_format: str, chunk: int) -> int:
    """What the model's KV caches take: its own per-layer shapes (gemma4: rings sized for `chunk`), else KVCache's."""
    if hasattr(model, "kv_cache_shapes"):
        return layer_kv_cache_bytes(model.kv_cache_shapes(n_ctx, chunk), kv_format)
    cfg = model.cfg
    return kv_cache_bytes(cfg.n_kv_layers, n_ctx, cfg.n_head_kv, cfg.head_dim, kv_format)


def ring_checkpoint_bytes(model, n_ctx: int, kv_format: str, chunk: int) -> int:
    """What each state checkpoint also copies of the model's sliding-window K/V rings (engine/checkpoints.py)."""
    if not hasattr(model, "ring_layers"):
        return 0
    shapes = model.kv_cache_shapes(n_ctx, chunk)
    return layer_kv_cache_bytes([shapes[i] for i in model.ring_layers], kv_format)


def plan_memory(model, manifest, gpu, opts, header=None) -> MemoryPlan:
    """The budget split of `model` (its work buffers not yet allocated) over the store `manifest` under
    StoreOptions `opts`; raises budget.BudgetTooSmall with the numbers. `header` (the store's GGUF header) lets the
    token table's rows come on demand (embedding_rows.py); without it the table stays resident."""
    cfg = model.cfg
    n_ctx = min(opts.n_ctx, cfg.n_ctx_train) if cfg.n_ctx_train else opts.n_ctx
    bufs = model.work_buffers()
    state = sum(4 * n for name, n in bufs if name.startswith(STATE_BUFFERS))
    acts_bytes = sum(4 * n for _, n in bufs)
    record = manifest["layout"]["experts"]["record_size"]
    look = opts.prefetch_depth > 0 and opts.prefetch_guess == "lookahead"
    la_extra = (3 if opts.lookahead_source == "h" else 2) * opts.prefetch_depth if look else 0
    la_bytes = RouterLookAhead.gpu_bytes(cfg, opts.prefetch_depth) if look else 0
    guard = guard_args_allowance(cfg.n_layer, cfg.n_expert * cfg.n_layer * record, gpu, opts.max_pool_buffer,
                                 la_extra)
    # activations, logits and ids staging, the step uniform, the early-stop readback (logits + routed ids) and
    # indirect arguments (counted whatever the mode: the mode follows from the pool size), the pool's own
    # small buffers
    work = (acts_bytes - state + 4 * cfg.n_vocab + 4 * MAX_TOP_K + 16
            + 4 * cfg.n_vocab + 256 + 4 * cfg.n_expert_used * cfg.n_layer + guard + la_bytes
            + ExpertPool.overhead_bytes(record, cfg.n_layer, cfg.n_expert, opts.upload, opts.ring_buffers))
    dense = dense_gpu_bytes(manifest)
    asked_chunk = default_prefill_chunk(gpu, cfg) if opts.prefill_chunk is None else opts.prefill_chunk
    kv_state = model_kv_bytes(model, n_ctx, opts.kv_format, asked_chunk) + state

    def split(dense, work):
        """(chunk, checkpoints, budget plan) with the dense planes and work buffers of `dense` and `work` bytes."""
        rest = dense + kv_state + work + min_pool_bytes(record, cfg.n_layer, cfg.n_expert, cfg.n_expert_used)
        chunk = fit_prefill_chunk(model, asked_chunk, opts.budget_bytes, rest)
        ring = ring_checkpoint_bytes(model, n_ctx, opts.kv_format, chunk)
        checkpoints = fit_checkpoints(model, opts.state_checkpoints, opts.budget_bytes,
                                      rest + chunk_bytes(model, chunk), ring)
        budget = plan_budget(opts.budget_bytes, BudgetInputs(
            dense=dense, kv_state=kv_state + checkpoint_bytes(model, checkpoints) + checkpoints * ring,
            work=work + chunk_bytes(model, chunk), record_bytes=record, n_layers=cfg.n_layer,
            n_experts=cfg.n_expert, top_k=cfg.n_expert_used,
            max_binding=gpu.max_binding, max_buffer=gpu.limits["maxBufferSize"], max_pool_buffer=opts.max_pool_buffer,
            pool_fraction=opts.pool_fraction))
        return chunk, checkpoints, budget

    planes = table_planes(manifest)
    ask = EmbeddingAsk(opts.embedding_rows, opts.budget_bytes,
                       why_resident(header, manifest) if header is not None else "the model's header was not given",
                       cfg.n_vocab, cfg.n_embd, sum(_round4(p["nbytes"]) for p in planes.values()), asked_chunk)
    resident = {}

    def resident_plan():
        resident["split"] = split(dense, work)
        return resident["split"][2]

    embedding = plan_embedding_rows(ask, resident_plan)
    if embedding.on_demand:
        chunk, checkpoints, budget = split(dense - embedding.table_bytes, work + embedding.cache_bytes)
    else:
        chunk, checkpoints, budget = resident.get("split") or split(dense, work)
    return MemoryPlan(budget, n_ctx, chunk, state, look, la_extra, guard, checkpoints, embedding)
