"""The token table's rows on demand: under a tight GPU budget `token_embd` stays in the store and only the rows of
the tokens being run come to the GPU, through a row cache of S slots (residency/row_cache.py).

Why: a Q8_0 table of Qwen3.6's 248,320 x 2048 takes 540 MB, a lookup reads one row of it per token. Under a 4 GB
budget those bytes hold ~160 more expert slots. The output head cannot do the same (it reads every row each token),
so a model whose head is its token table (tied embeddings) keeps the table resident.

- `plan_embedding_rows` (called by memory_plan.py) decides: rows on demand when StoreOptions(embedding_rows=S)
  asks for S slots, or, left to the planner (None), when the budget is a number and either the plan with the table
  resident does not fit, or its expert pool is partial and the table would take more than EMBEDDING_BUDGET_SHARE of
  the budget. 0 keeps the table resident.
- `DensePlaneRows` reads rows from dense.bin as the store already lays them out (a Q8_0 tensor's code plane and its
  scale plane, row-major): row r's codes at codes + r * cols, its scales at scales + 2 * r * cols / 32; no ingest
  change, so every existing store can serve its rows. A cached row is its codes then its scales (padded to 4 B).
- `CachedEmbedding` stands in for model.token_embd: the models' `embed` launchers (Kernels.embed,
  ChunkKernels.embed) record shaders/embed_output/embed_cached*.wgsl over the cache's planes and slot map instead
  of the resident row bands. The decoder pins the ids a submit embeds (`async with pinned(ids)`: missing rows read
  and uploaded, the slot map flushed) before the submit and releases them after it: an upload that later reuses a
  slot is queued behind the submit that read the old row.
- The ids must be known on the host before each submit: the prompt's, or the token just sampled. A greedy step
  queued behind another (Decoder.launch_argmax) takes its id from the GPU's argmax, so with rows on demand the
  decoder does not queue ahead (StoreDecoder refuses launch_*; its `chains` is False anyway).
"""
import hashlib
import json
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ..gguf import GGMLType
from ..residency.row_table import RowTable
from .budget import BudgetTooSmall
from ..store.layout import DENSE_FILE

TABLE = "token_embd.weight"
HEAD = "output.weight"
# left to the planner, the table's rows come on demand when the table would take more than this share of a budget
# whose expert pool is partial (Qwen3.6's 540 MB table: budgets below ~8.6 GB)
EMBEDDING_BUDGET_SHARE = 1 / 16
# slots the planner gives the cache (at least the prefill chunk, at most the vocabulary): a chat's tokens repeat
# (template, names, common words), 4096 rows of 2 KB are 9 MB
DEFAULT_EMBEDDING_ROWS = 4096


def _round4(n: int) -> int:
    return (n + 3) & ~3


def table_planes(manifest) -> dict:
    """{kind: plane} of the token table in dense.bin."""
    return {p["kind"]: p for p in manifest["layout"]["dense"]["planes"] if p["tensor"] == TABLE}


def why_resident(header, manifest):
    """Why the token table cannot come row by row (a sentence), or None when it can."""
    t = header.tensors_by_name.get(TABLE)
    if t is None:
        return f"the model has no {TABLE}"
    if HEAD not in header.tensors_by_name:
        return "the output head is the token table (tied embeddings): it reads every row each token"
    if t.type != GGMLType.Q8_0:
        return f"the token table is {t.type.name}; rows on demand read Q8_0 tables only"
    planes = table_planes(manifest)
    if "codes" not in planes or "scales" not in planes:
        return "the store keeps no code and scale planes for the token table"
    return None


def row_bytes_of(cols: int) -> int:
    """Bytes of one cached Q8_0 row: its codes, then its f16 scales padded to whole 32-bit words."""
    return cols + _round4(2 * (cols // 32))


def cache_bytes(rows: int, cols: int, slots: int) -> int:
    """GPU bytes of a row cache of `slots` rows of a `rows` x `cols` table: the slots and the id -> slot map."""
    return slots * row_bytes_of(cols) + 4 * rows


@dataclass(frozen=True)
class EmbeddingChoice:
    """The planner's choice for the token table: resident (slots 0) or rows on demand through `slots` slots."""
    slots: int
    table_bytes: int  # GPU bytes the table takes resident (its planes)
    cache_bytes: int  # GPU bytes of the row cache (0 when resident)
    reason: str

    @property
    def on_demand(self) -> bool:
        return self.slots > 0

    def to_dict(self) -> dict:
        return {"mode": "rows" if self.on_demand else "resident", "slots": self.slots,
                "table_bytes": self.table_bytes, "cache_bytes": self.cache_bytes, "reason": self.reason}


@dataclass(frozen=True)
class EmbeddingAsk:
    """What the planner weighs: StoreOptions.embedding_rows (None: planner's choice, 0: resident, S: S slots), the
    budget (bytes, None or "min"), why the rows cannot come on demand (None: they can), the table's shape and
    bytes, and the largest prefill chunk the decoder may run (the cache must hold one chunk's distinct ids)."""
    asked: object
    budget_bytes: object
    why_not: object
    rows: int
    cols: int
    table_bytes: int
    chunk: int


def plan_embedding_rows(ask: EmbeddingAsk, resident_plan) -> EmbeddingChoice:
    """The choice for `ask`; `resident_plan()` is the budget plan with the table resident (raises
    budget.BudgetTooSmall when it does not fit). A forced choice the model cannot take raises ValueError."""
    def resident(reason):
        return EmbeddingChoice(0, ask.table_bytes, 0, reason)

    def rows(slots, reason):
        slots = min(slots, ask.rows)
        return EmbeddingChoice(slots, ask.table_bytes, cache_bytes(ask.rows, ask.cols, slots), reason)

    if ask.asked is not None:
        if ask.asked == 0:
            return resident("asked: resident")
        if ask.why_not is not None:
            raise ValueError(f"the token table's rows cannot come on demand: {ask.why_not}")
        if min(ask.asked, ask.rows) < min(ask.chunk, ask.rows):
            raise ValueError(f"embedding_rows {ask.asked} is fewer than the prefill chunk's {ask.chunk} tokens: give "
                             f"at least {ask.chunk} rows, or a smaller prefill chunk")
        return rows(ask.asked, "asked")
    if ask.why_not is not None:
        return resident(ask.why_not)
    budget = ask.budget_bytes
    if not isinstance(budget, int) or isinstance(budget, bool):
        return resident("no budget in bytes" if budget is None else f"budget {budget!r}: sized with the table resident")
    slots = min(max(DEFAULT_EMBEDDING_ROWS, ask.chunk), ask.rows)
    if cache_bytes(ask.rows, ask.cols, slots) >= ask.table_bytes:
        return resident("a row cache would take no fewer bytes than the table")
    try:
        plan = resident_plan()
    except BudgetTooSmall:
        return rows(slots, "the budget cannot hold the table resident")
    share = ask.table_bytes / budget
    if plan.full:
        return resident("the budget holds the table and every expert")
    if share > EMBEDDING_BUDGET_SHARE:
        return rows(slots, f"the table would take {share:.1%} of the budget, more than "
                           f"{EMBEDDING_BUDGET_SHARE:.2%}, with a partial expert pool")
    return resident(f"the table takes {share:.1%} of the budget, at most {EMBEDDING_BUDGET_SHARE:.2%}")


class DensePlaneRows:
    """The token table's rows read from dense.bin (the row-table interface RowCache uses: name, rows, row_bytes,
    fingerprint, read_rows)."""

    def __init__(self, sink, manifest, rows: int, cols: int):
        planes = table_planes(manifest)
        self.sink, self.codes, self.scales = sink, planes["codes"], planes["scales"]
        self.name, self.rows, self.cols = TABLE, rows, cols
        self.row_bytes = row_bytes_of(cols)
        self.scale_bytes = 2 * (cols // 32)
        sums = manifest.get("checksums", {}).get("dense", {})
        ident = {"header": manifest.get("source", {}).get("header_sha256"), "codes": self.codes,
                 "scales": self.scales, "crc": [sums.get(f"{TABLE}:codes"), sums.get(f"{TABLE}:scales")]}
        self.fingerprint = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
        self._runs = RowTable(sink, {"name": TABLE, "rows": rows, "row_bytes": self.row_bytes, "dtype": "u32",
                                     "columns": self.row_bytes // 4, "fingerprint": self.fingerprint})
        self.reads = 0
        self.bytes_read = 0

    async def _read(self, offset, n):
        data = await self.sink.read(DENSE_FILE, offset, n)
        if len(data) != n:
            raise OSError(f"{DENSE_FILE}: short read of the token table at byte {offset} ({len(data)} of {n} B); "
                          "the store is damaged, verify or ingest it again")
        self.reads += 1
        self.bytes_read += n
        return memoryview(data)

    async def read_rows(self, ids) -> dict:
        """{row id: bytes} for the distinct ids, neighbouring rows read together (RowTable.runs)."""
        out, pad = {}, b"\0" * (self.row_bytes - self.cols - self.scale_bytes)
        wanted = sorted(set(ids))
        i = 0
        for first, last in self._runs.runs(wanted):
            n = last - first + 1
            codes = await self._read(self.codes["offset"] + first * self.cols, n * self.cols)
            scales = await self._read(self.scales["offset"] + first * self.scale_bytes, n * self.scale_bytes)
            while i < len(wanted) and wanted[i] <= last:
                r = wanted[i] - first
                out[wanted[i]] = (bytes(codes[r * self.cols:(r + 1) * self.cols])
                                  + bytes(scales[r * self.scale_bytes:(r + 1) * self.scale_bytes]) + pad)
                i += 1
        return out


class CachedEmbedding:
    """model.token_embd when its rows come on demand: the shape of the table (GpuMatrix-like name, fmt, rows, cols),
    the row cache on the GPU, and the lookups the models' embed launchers record."""

    fmt = "q8"
    row_base = 0

    def __init__(self, gpu, sink, manifest, rows: int, cols: int, slots: int, pipelines=None):
        from ..residency.row_cache import GpuRowCache

        self.name, self.rows, self.cols = TABLE, rows, cols
        self.table = DensePlaneRows(sink, manifest, rows, cols)
        # rows of ~2 KB: writeBuffer per row (the staging ring pays off for MB-sized records, not these)
        self.gpu_cache = GpuRowCache(gpu, self.table, slots, upload="writebuffer", pipelines=pipelines)
        self.cache = self.gpu_cache.cache
        self.nbytes = cache_bytes(rows, cols, slots)

    @property
    def bands(self):
        # a launcher that reads resident row bands would record nothing and embed zeros: refuse it loudly
        raise RuntimeError(f"{TABLE}: its rows come on demand through the row cache; this lookup reads resident "
                           "rows (give the decoder a budget with room for the table, or embedding_rows=0)")

    def require_whole(self, what: str) -> None:
        pass

    def _plane_params(self, plane):
        lay = self.cache.layout
        return {"n": self.cols, "stride_words": lay.slot_stride // 4, "scales_word": self.cols // 4,
                "slots_per_plane": lay.slots_per_buffer, "plane": plane, "table_rows": self.rows}

    def record_embed(self, kern, dl, y, label):
        """The decode token's row (step.token) into y, one dispatch per plane of the cache."""
        for b, plane in enumerate(self.gpu_cache.planes):
            kern.record(dl, "embed_cached.wgsl", {}, {1: kern.step, 2: y, 3: self.gpu_cache.map_buffer, 4: plane},
                        (self.cols + 255) // 256, f"{label}@{b}", self._plane_params(b))

    def record_embed_rows(self, ck, dl, ids, y, label):
        """A prefill chunk's rows (ids[t], t < chunk.n) into y, one dispatch per plane of the cache."""
        for b, plane in enumerate(self.gpu_cache.planes):
            ck.record(dl, "embed_cached_rows.wgsl", {},
                      {1: ck.chunk, 2: y, 3: self.gpu_cache.map_buffer, 4: plane, 5: ids},
                      ((self.cols + 255) // 256, ck.T), f"{label}@{b}", self._plane_params(b))

    @asynccontextmanager
    async def pinned(self, ids):
        """Rows of `ids` resident (read and uploaded where missing) and the slot map sent, for the submits made
        inside the block; released after it."""
        slots = await self.cache.lookup(ids)
        try:
            self.gpu_cache.flush_map()
            yield slots
        finally:
            self.cache.release(set(slots))

    def summary(self) -> dict:
        st = dict(self.cache.stats)
        found = st["hits"] + st["late_hits"]
        st.update(slots=self.cache.slots, resident=self.cache.resident, reads=self.table.reads,
                  bytes_read=self.table.bytes_read,
                  hit_rate=found / (found + st["misses"]) if found + st["misses"] else None)
        return st

    def release(self):
        self.gpu_cache.release()
