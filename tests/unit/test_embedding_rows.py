"""The token table's rows on demand (py_engine/engine/embedding_rows.py): the planner's choice under budgets of a
Qwen3.6-sized model, what keeps a table resident, and single rows read from a real store's dense planes."""
import asyncio
from types import SimpleNamespace

import pytest

from py_engine.engine.budget import BudgetInputs, BudgetTooSmall, plan_budget
from py_engine.engine.embedding_rows import (DEFAULT_EMBEDDING_ROWS, EMBEDDING_BUDGET_SHARE, DensePlaneRows,
                                             EmbeddingAsk, cache_bytes, plan_embedding_rows, row_bytes_of,
                                             why_resident)
from py_engine.gguf import GGMLType, read_gguf_file
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource

GB = 1 << 30
# Qwen3.6-35B-A3B, Q8_0 (docs: ARCHITECTURE.md): vocab 248,320 x 2048, a 3,342,336 B expert record, 40 x 256
# experts top-8, a dense trunk of 2.67 GB of which the token table is one row-major Q8_0 tensor
VOCAB, EMBD = 248_320, 2048
TABLE = VOCAB * (EMBD + 2 * EMBD // 32)  # 540 MB: codes and f16 scales
DENSE = int(2.67e9)
KV_STATE, WORK = 200 << 20, 300 << 20
CHUNK = 512


def inputs(dense, work):
    return BudgetInputs(dense=dense, kv_state=KV_STATE, work=work, record_bytes=3_342_336, n_layers=40,
                        n_experts=256, top_k=8, max_binding=2 * GB, max_buffer=2 * GB)


def choose(budget, asked=None, why_not=None, rows=VOCAB, table=TABLE):
    ask = EmbeddingAsk(asked, budget, why_not, rows, EMBD, table, CHUNK)
    return plan_embedding_rows(ask, lambda: plan_budget(budget, inputs(DENSE, WORK)))


def test_a_tight_budget_takes_the_rows_on_demand_and_gains_expert_slots():
    choice = choose(4 * GB)  # the table would be 12.6 % of the budget, the pool partial
    assert choice.on_demand and choice.slots == DEFAULT_EMBEDDING_ROWS and "12.6% of the budget" in choice.reason
    assert choice.cache_bytes == DEFAULT_EMBEDDING_ROWS * row_bytes_of(EMBD) + 4 * VOCAB < 10 << 20
    resident = plan_budget(4 * GB, inputs(DENSE, WORK))
    rows = plan_budget(4 * GB, inputs(DENSE - TABLE, WORK + choice.cache_bytes))
    assert not resident.full and rows.slots - resident.slots >= 155  # ~540 MB more of 3.3 MB records
    assert choice.to_dict() == {"mode": "rows", "slots": DEFAULT_EMBEDDING_ROWS, "table_bytes": TABLE,
                                "cache_bytes": choice.cache_bytes, "reason": choice.reason}


def test_a_roomy_budget_keeps_the_table_resident():
    share_edge = int(TABLE / EMBEDDING_BUDGET_SHARE)  # above it the table is a small share of the budget
    under = choose(share_edge + GB)  # partial pool, but the table is under the share
    assert not under.on_demand and under.reason == "the table takes 5.6% of the budget, at most 6.25%"
    roomy = choose(64 * GB)  # every expert resident: nothing to gain
    assert not roomy.on_demand and roomy.reason == "the budget holds the table and every expert"
    assert choose(share_edge - GB).on_demand
    assert choose(None).reason == "no budget in bytes" and not choose("min").on_demand  # no budget to fit


def test_a_budget_too_small_for_the_resident_table_tries_the_rows():
    budget = DENSE + KV_STATE + WORK + 16 * 3_342_336 - 1  # one byte short with the table resident
    with pytest.raises(BudgetTooSmall):
        plan_budget(budget, inputs(DENSE, WORK))
    choice = choose(budget)
    assert choice.on_demand and choice.reason == "the budget cannot hold the table resident"
    plan = plan_budget(budget, inputs(DENSE - TABLE, WORK + choice.cache_bytes))
    assert plan.slots > plan.min_slots


def test_what_keeps_the_table_resident():
    tied = "the output head is the token table (tied embeddings): it reads every row each token"
    kept = choose(4 * GB, why_not=tied)
    assert not kept.on_demand and kept.reason == tied and kept.cache_bytes == 0
    # a small vocabulary: the cache (its slots and the id -> slot map) would be no smaller than the table
    small = choose(4 * GB, rows=461, table=461 * 136)
    assert not small.on_demand and "no fewer bytes" in small.reason
    assert cache_bytes(461, 128, 461) >= 461 * 136


def test_asked_choices_are_kept_or_refused_with_the_reason():
    assert choose(64 * GB, asked=CHUNK).slots == CHUNK  # asked: on demand even with room to spare
    assert choose(None, asked=10 * VOCAB).slots == VOCAB  # never more slots than rows
    assert not choose(4 * GB, asked=0).on_demand and choose(4 * GB, asked=0).reason == "asked: resident"
    with pytest.raises(ValueError, match="tied embeddings"):
        choose(4 * GB, asked=CHUNK, why_not="the output head is the token table (tied embeddings)")
    with pytest.raises(ValueError, match=f"give at least {CHUNK} rows, or a smaller prefill chunk"):
        choose(4 * GB, asked=CHUNK - 1)


def _header(tensors):
    return SimpleNamespace(tensors_by_name={name: SimpleNamespace(type=t) for name, t in tensors.items()})


def test_why_resident_names_what_the_rows_need():
    planes = {"layout": {"dense": {"planes": [{"tensor": "token_embd.weight", "kind": k} for k in ("codes",
                                                                                                     "scales")]}}}
    q8 = GGMLType.Q8_0
    assert why_resident(_header({"token_embd.weight": q8, "output.weight": q8}), planes) is None
    assert "tied" in why_resident(_header({"token_embd.weight": q8}), planes)
    assert "Q6_K" in why_resident(_header({"token_embd.weight": GGMLType.Q6_K, "output.weight": q8}), planes)
    no_planes = {"layout": {"dense": {"planes": []}}}
    assert "no code and scale planes" in why_resident(_header({"token_embd.weight": q8, "output.weight": q8}),
                                                      no_planes)


@pytest.mark.parametrize("stem", ["micro-qwen3moe", "qwen3vocab-qwen3moe"])
def test_rows_read_from_the_dense_planes_are_the_gguf_rows(fixture_models, tmp_path, stem):
    """Row r of a store's token table (codes then scales, padded to 32-bit words) is the GGUF's row r, its Q8_0
    blocks split (qwen3vocab: rows of one block, 2 B of scales padded to 4)."""
    path = fixture_models / f"{stem}.gguf"
    src = FileSource(path)
    sink = DirectoryStorage(tmp_path).sink("m")
    try:
        manifest = asyncio.run(ingest(src, sink))
    finally:
        src.close()
    header = read_gguf_file(path)
    assert why_resident(header, manifest) is None
    t = header.tensor("token_embd.weight")
    cols, rows = t.dims[0], t.dims[1]
    nb = cols // 32
    raw = path.read_bytes()[t.abs_offset:t.abs_offset + t.nbytes]
    table = DensePlaneRows(sink, manifest, rows, cols)
    pad = b"\0" * (-2 * nb % 4)
    assert table.row_bytes == cols + 2 * nb + len(pad) == row_bytes_of(cols)
    ids = [0, 3, 4, 9, rows - 1, 3, rows // 2]
    got = asyncio.run(table.read_rows(ids))
    assert sorted(got) == sorted(set(ids))
    for r in set(ids):
        blocks = [raw[(r * nb + b) * 34:(r * nb + b + 1) * 34] for b in range(nb)]
        assert got[r] == b"".join(b[2:] for b in blocks) + b"".join(b[:2] for b in blocks) + pad
    # neighbours merge into one run (two reads: codes and scales); far rows take runs of their own
    assert table.reads == 2 * len(table._runs.runs(ids))
    other = DensePlaneRows(sink, dict(manifest, checksums={"dense": {"token_embd.weight:codes": 1}}), rows, cols)
    assert other.fingerprint != table.fingerprint  # changed planes: a cache keyed by it starts over
