"""The upload benchmark runs (CI-sized, on lavapipe) and both upload paths land every byte in its slot."""
from diskformer.node_engine import run_in_node
from lab import ENGINE_SIDE


def test_staging_ring_and_write_buffer_land_every_byte():
    res = run_in_node("lab.engine_bench.uploads:run", {"record_bytes": 1 << 20, "count": 12, "ring": 3},
                      packages=[ENGINE_SIDE])
    assert set(res["results"]) == {"staging_ring", "write_buffer"}
    for name, r in res["results"].items():
        assert r["bytes_landed"], name
        assert r["GBps"] > 0 and r["seconds"] > 0, name
