"""The Node record reader (py_engine/store/node_reader.py) in Pyodide + Node: a batch of records read in parallel
through Node's fs gives the store's bytes in the order asked, a truncated experts.bin is reported, and the store
engine picks this reader when it runs under Node."""
import asyncio
import hashlib


from diskformer.node_engine import run_in_node
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource


CODE = """
import hashlib, json
from py_engine.store.local import DirectorySink
from py_engine.store.node_reader import NodeRecordReader, in_node, record_reader_for

async def main(args):
    folder = args["folder"]
    manifest = json.loads(open(folder + "/manifest.json").read())
    reader = await record_reader_for(DirectorySink(folder), manifest)
    keys = args["keys"]
    got = await reader.read_records(keys[0][0], [e for _, e in keys])
    digests = [hashlib.sha256(g.to_bytes()).hexdigest() for g in got]
    one = hashlib.sha256((await reader.read_record(*args["one"])).to_bytes()).hexdigest()
    reader.release()
    short = None
    try:
        cut = await NodeRecordReader.open(args["cut"], manifest)
        await cut.read_records(0, [manifest["layout"]["experts"]["n_experts"] - 1])
    except OSError as exc:
        short = str(exc)
    return {"node": in_node(), "kind": type(reader).__name__, "digests": digests, "one": one, "short": short}
"""


def test_parallel_batch_reads_give_the_stores_bytes(fixture_models, tmp_path):
    storage = DirectoryStorage(tmp_path)
    src = FileSource(fixture_models / "tiny-qwen3moe.gguf")
    try:
        manifest = asyncio.run(ingest(src, storage.sink("m")))
    finally:
        src.close()
    ex = manifest["layout"]["experts"]
    size, n = ex["record_size"], ex["n_experts"]
    data = (tmp_path / "m" / "experts.bin").read_bytes()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "experts.bin").write_bytes(data[:n * size - 100])  # layer 0's last record is short
    keys = [[3, e] for e in (5, 0, 15, 7, 5)]  # out of order, one twice
    out = run_in_node(CODE, {"folder": str(tmp_path / "m"), "keys": keys, "one": [7, 2], "cut": str(cut)},
                      mounts=[tmp_path])
    want = [hashlib.sha256(data[(layer * n + e) * size:(layer * n + e + 1) * size]).hexdigest() for layer, e in keys]
    assert out["node"] is True and out["kind"] == "NodeRecordReader"
    assert out["digests"] == want
    assert out["one"] == hashlib.sha256(data[(7 * n + 2) * size:(7 * n + 3) * size]).hexdigest()
    assert out["short"] and "short read" in out["short"] and "ingest it again" in out["short"]
