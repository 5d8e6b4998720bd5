"""The GPU budget: how `gpu_budget_bytes` splits into dense weights, KV cache / recurrent state, work buffers and
the expert pool, and the smallest budget a model can run in.

    pool = budget - dense - kv_state - work,   slots = min(pool // slot_stride, layers * experts)

Minimum pool: 2 * top_k records. Why that number: the engine pins one layer's top_k experts from its `ensure`
until the submit that reads them, and the streamer needs room for as many more so the next layer's demand (or a
prefetch of it) can load while the first layer's slots are still pinned. Fewer slots would make a demand wait on
the pin of the layer before it or fail with PoolExhausted. Budgets below dense + kv_state + work + 2·top_k·stride
are refused with the numbers. `budget_bytes=None` means "as many slots as the model has experts".

The pool is cut into buffers of at most min(maxStorageBufferBindingSize, maxBufferSize) bytes (slot_pool.py), and
never asks for more slots than the model has experts. Not counted: the small per-dispatch parameter uniforms
(tens of bytes per dispatch, ~1 KiB per layer).
"""
import math
from dataclasses import dataclass

from ..residency.slot_pool import SlotPoolLayout, round_up

MAX_U32_OFFSET = 0xFFFFFF00  # the expert kernels address a pool buffer with u32 byte offsets


class BudgetTooSmall(ValueError):
    """The budget cannot hold the dense part plus the minimum expert pool."""


def mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


class BudgetPlan:
    def __init__(self, budget, dense, kv_state, work, pool_layout, n_records, min_slots):
        self.budget, self.dense, self.kv_state, self.work = budget, dense, kv_state, work
        self.pool = pool_layout
        self.n_records = n_records
        self.min_slots = min_slots

    @property
    def slots(self) -> int:
        return self.pool.slots

    @property
    def full(self) -> bool:
        """Every expert of every layer has its own slot: routing never needs the CPU."""
        return self.pool.slots >= self.n_records

    @property
    def total(self) -> int:
        return self.dense + self.kv_state + self.work + self.pool.total_bytes

    def to_dict(self) -> dict:
        return {"budget": self.budget, "dense": self.dense, "kv_state": self.kv_state, "work": self.work,
                "pool": self.pool.total_bytes, "slots": self.pool.slots, "slot_stride": self.pool.slot_stride,
                "pool_buffers": self.pool.buffer_count, "slots_per_buffer": self.pool.slots_per_buffer,
                "records": self.n_records, "min_slots": self.min_slots, "full": self.full, "total": self.total}


def min_pool_bytes(record_bytes: int, n_layers: int, n_experts: int, top_k: int, alignment: int = 256) -> int:
    """The smallest expert pool plan_budget accepts: 2·top_k slots (or every record, if fewer)."""
    return min(2 * top_k, n_layers * n_experts) * round_up(record_bytes, alignment)


@dataclass(frozen=True)
class BudgetInputs:
    """What a budget is split over: the fixed parts' bytes (dense weights, KV cache / recurrent state, work
    buffers), one expert record's bytes and the experts' count, and the device's buffer limits (max_pool_buffer: a
    smaller cap on a pool buffer, for tests). `pool_fraction` asks for slots for that share of all experts (at least
    the minimum), as long as the budget holds them (benchmarks: "LRU holding 40 % of experts")."""
    dense: int
    kv_state: int
    work: int
    record_bytes: int
    n_layers: int
    n_experts: int
    top_k: int
    max_binding: int
    max_buffer: int
    max_pool_buffer: int = None
    pool_fraction: float = None
    alignment: int = 256


def plan_budget(budget_bytes, inputs: BudgetInputs) -> BudgetPlan:
    """Split a GPU budget (None: no limit, every expert gets a slot; "min": the smallest allowed) over `inputs`;
    raises BudgetTooSmall."""
    dense, kv_state, work, record_bytes = inputs.dense, inputs.kv_state, inputs.work, inputs.record_bytes
    pool_fraction, alignment = inputs.pool_fraction, inputs.alignment
    n_records = inputs.n_layers * inputs.n_experts
    top_k = inputs.top_k
    min_slots = min(2 * top_k, n_records)
    stride = round_up(record_bytes, alignment)
    fixed = dense + kv_state + work
    if pool_fraction is not None:
        if not 0 < pool_fraction <= 1:
            raise ValueError(f"pool_fraction must be in (0, 1], got {pool_fraction}")
        want = max(min_slots, min(n_records, math.ceil(pool_fraction * n_records)))
        if budget_bytes is None or budget_bytes == "min":
            budget_bytes = fixed + want * stride
    if budget_bytes is None:
        slots = n_records
    elif budget_bytes == "min":  # the smallest budget this model runs in (tests, benchmarks of the worst case)
        budget_bytes = fixed + min_slots * stride
        slots = min_slots
    else:
        need = fixed + min_slots * stride
        if budget_bytes < need:
            raise BudgetTooSmall(
                f"a GPU budget of {budget_bytes} B ({mib(budget_bytes)}) is too small for this model: dense weights "
                f"{dense} B + KV cache/state {kv_state} B + work buffers {work} B = {fixed} B, plus an expert pool "
                f"of at least 2·top_k = {min_slots} records of {stride} B = {min_slots * stride} B; "
                f"give at least {need} B ({mib(need)})")
        slots = min((budget_bytes - fixed) // stride, n_records)
        if pool_fraction is not None:
            slots = min(slots, want)
    limit = min(int(inputs.max_binding), int(inputs.max_buffer), MAX_U32_OFFSET)
    if inputs.max_pool_buffer is not None:
        limit = min(limit, int(inputs.max_pool_buffer))
    layout = SlotPoolLayout(record_bytes, slots, limit - limit % alignment, alignment)
    return BudgetPlan(budget_bytes, dense, kv_state, work, layout, n_records, min_slots)
