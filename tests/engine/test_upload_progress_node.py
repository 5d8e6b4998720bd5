"""The weights upload's progress on a real WebGPU device (Dawn on lavapipe): a GGUF loaded directly counts every
tensor up to the bytes the decoder uploaded; a stored model counts its dense planes, and with a pool that holds
every expert also each expert record; the figures rise, end on the total, and come a few times, not per write."""
import asyncio

import pytest

from diskformer.node_engine import run_in_node

MODEL = "micro-qwen3moe"

NODE_CODE = r'''
from pathlib import Path
from py_engine.gpu.device import open_gpu
from py_engine.engine.decoder import Decoder
from py_engine.engine.store_decoder import StoreDecoder
from py_engine.store.local import DirectorySink

async def main(args):
    gpu = await open_gpu()
    out = {}
    for tag, budget in (("direct", None), ("store_full", None), ("store_partial", "min")):
        told = []
        report = lambda done, total: told.append([done, total])
        if tag == "direct":
            dec = await Decoder.open(args["gguf"], gpu, n_ctx=32, upload_progress=report)
        else:
            dec = await StoreDecoder.open_store(DirectorySink(Path(args["store"])), gpu, n_ctx=32,
                                                budget_bytes=budget, upload_progress=report)
        plan = getattr(dec, "plan", None)  # a directly loaded GGUF has no pool plan: every expert is a tensor
        out[tag] = {"told": told, "weights_bytes": dec.stats["weights_bytes"],
                    "full": plan.full if plan is not None else True,
                    "records": (plan.pool.record_bytes * dec.model.cfg.n_layer * dec.model.cfg.n_expert
                                if plan is not None else 0)}
        dec.release()
    return out
'''


@pytest.fixture(scope="module")
def uploads(fixture_models, tmp_path_factory):
    from py_engine.store import ingest
    from py_engine.store.local import DirectoryStorage, FileSource

    root = tmp_path_factory.mktemp("upload_store")
    src = FileSource(fixture_models / f"{MODEL}.gguf")
    try:
        asyncio.run(ingest(src, DirectoryStorage(root).sink(MODEL)))
    finally:
        src.close()
    return run_in_node(NODE_CODE, {"gguf": str(fixture_models / f"{MODEL}.gguf"), "store": str(root / MODEL)},
                       mounts=[fixture_models, root], timeout=400)


def _check_told(told, total):
    assert told, "no upload progress was told"
    assert told[-1] == [total, total]
    assert all(t == total for _, t in told)  # known from the start: the file's tensors or the store's plan
    done = [d for d, _ in told]
    assert done == sorted(set(done)) and done[0] > 0


def test_direct_load_counts_every_tensor(uploads, fixture_models):
    from py_engine.gguf import read_gguf_file

    res = uploads["direct"]
    file_bytes = sum(t.nbytes for t in read_gguf_file(fixture_models / f"{MODEL}.gguf").tensors_by_name.values())
    assert res["weights_bytes"] == file_bytes
    _check_told(res["told"], file_bytes)


def test_store_load_counts_dense_planes_and_a_full_pool(uploads):
    full, partial = uploads["store_full"], uploads["store_partial"]
    assert full["full"] and not partial["full"]
    assert full["records"] > 0
    _check_told(full["told"], full["weights_bytes"] + full["records"])
    _check_told(partial["told"], partial["weights_bytes"])  # a partial pool fills as tokens need experts
