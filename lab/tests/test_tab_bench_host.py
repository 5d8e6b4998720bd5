"""The bench page's host (lab/browser_bench/host.py): the product's server with the bench-only mount, on a real
uvicorn server. The mount serves the page, the adapter probe and the lab's engine side only; the model comes
through the product's /models/ route with Range; the product's own app has no such mount."""
import asyncio
import shutil

import httpx

from diskformer.server import create_app
from lab.browser_bench.host import BenchServer, engine_side_files


def test_bench_mount_serves_the_engine_side_and_nothing_else(fixture_models, tmp_path):
    model = tmp_path / "m.gguf"
    shutil.copy(fixture_models / "micro-qwen35moe.gguf", model)
    with BenchServer(tmp_path, 0) as url, httpx.Client(base_url=url) as http:
        listed = http.get("/lab-bench/src.json").json()
        assert listed == sorted(engine_side_files())
        assert "lab/engine_bench/entry.py" in listed and "lab/engine_bench/shaders/bench_stream_read.wgsl" in listed
        r = http.get("/lab-bench/src/lab/engine_bench/entry.py")
        assert r.status_code == 200 and "async def run(" in r.text
        assert r.headers["cross-origin-embedder-policy"] == "require-corp"
        for outside in ("/lab-bench/src/lab/bench.py", "/lab-bench/src/diskformer/server.py",
                        "/lab-bench/src/lab/engine_bench/../../pyproject.toml", "/lab-bench/gpu/../bench.py"):
            assert http.get(outside).status_code == 404, outside
        assert http.post("/lab-bench/bench.html").status_code == 405
        assert "runBench" in http.get("/lab-bench/bench.html").text
        assert "probeAdapter" in http.get("/lab-bench/gpu/webgpu_costs.mjs").text
        ranged = http.get("/models/m.gguf", headers={"Range": "bytes=0-3"})
        assert ranged.status_code == 206 and ranged.content == b"GGUF"
        assert [m["name"] for m in http.get("/api/models").json() if not m["builtin"]] == ["m.gguf"]
    assert asyncio.run(product_status(create_app(tmp_path), "/lab-bench/src.json")) == 404


async def product_status(app, path: str) -> int:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        return (await http.get(path)).status_code
