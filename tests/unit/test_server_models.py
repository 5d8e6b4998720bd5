"""The host's APIs against a real uvicorn server on a free port: the model list, the built-in models, the engine
wheel route (and its rebuild after a source edit), and the `serve` command. Routes, Range and bad requests:
test_server.py. Each test uses a small throwaway repo root (tmp, served_repo.py).
"""
import base64
import hashlib
import io
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx

from diskformer import engine_wheel
from diskformer.server import create_app
from served_repo import (BIG_SIZE, SECRET, LiveServer, assert_isolated, client, live, raw_request,  # noqa: F401
                         repo)

REPO = Path(__file__).resolve().parents[2]
WHEEL_URL = f"/wheels/{engine_wheel.WHEEL_NAME}"


# --- APIs and the engine wheel -------------------------------------------------------------------------------------

def test_api_models_lists_served_ggufs(client):
    r = client.get("/api/models")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    listed = {m["name"]: m for m in r.json()}
    assert sorted(listed) == ["big.gguf", "data.gguf", "empty.gguf", "sub/tiny.gguf"]
    assert listed["big.gguf"]["size"] == BIG_SIZE and listed["sub/tiny.gguf"]["size"] == 9
    assert all(isinstance(m["mtime"], float) for m in listed.values())


def test_builtin_models_are_served_and_listed_after_the_models_folder(tmp_path, repo):
    builtin = tmp_path / "demo"
    (builtin / "sub").mkdir(parents=True)
    (builtin / "demo-model.gguf").write_bytes(b"GGUF-demo-bytes")
    (builtin / "data.gguf").write_bytes(b"shadowed by the models folder")
    (builtin / "README.md").write_text("not a model")
    (builtin / ".hidden.gguf").write_bytes(b"hidden")
    (builtin / "sub" / "deep.gguf").write_bytes(b"only top-level built-ins")
    (builtin / "escape.gguf").symlink_to(repo / "secret.txt")
    for models_dir in (repo / "models", None):
        server = LiveServer(create_app(models_dir=models_dir, repo_root=repo, builtin_dir=builtin))
        try:
            with httpx.Client(base_url=server.url, timeout=10) as c:
                listed = c.get("/api/models").json()
                names = [m["name"] for m in listed]
                own = ["big.gguf", "data.gguf", "empty.gguf", "sub/tiny.gguf"] if models_dir else []
                builtins = ["demo-model.gguf"] if models_dir else ["data.gguf", "demo-model.gguf"]
                assert names == own + builtins  # the folder's first, then the built-in ones it does not shadow
                assert [m["builtin"] for m in listed] == [False] * len(own) + [True] * len(builtins)
                assert listed[-1]["size"] == len(b"GGUF-demo-bytes")
                r = c.get("/models/demo-model.gguf", headers={"Range": "bytes=5-"})
                assert r.status_code == 206 and r.content == b"demo-bytes"
                assert r.headers["access-control-allow-origin"] == "*"
                assert_isolated(r.headers)
                data = c.get("/models/data.gguf")
                if models_dir:
                    assert data.content == (repo / "models" / "data.gguf").read_bytes()
                else:
                    assert data.content == b"shadowed by the models folder"
            for target in (b"/models/README.md", b"/models/.hidden.gguf", b"/models/sub/deep.gguf",
                           b"/models/escape.gguf", b"/models/%2e%2e/demo/demo-model.gguf", b"/demo/demo-model.gguf"):
                status, headers, body = raw_request(server.port, target)
                assert status in (400, 404), target
                assert SECRET not in body
                assert_isolated(headers)
        finally:
            server.close()


def test_the_repo_ships_its_demo_model_as_builtin():
    host = create_app(models_dir=None).state.host
    listed = host.list_models()
    demo = [m for m in listed if m["builtin"]]
    assert [m["name"] for m in demo] == ["diskformer-demo-qwen35moe-q8_0.gguf"]
    assert demo[0]["size"] == (REPO / "demo" / "diskformer-demo-qwen35moe-q8_0.gguf").stat().st_size


def check_wheel(data: bytes) -> dict:
    """Open wheel bytes, verify every RECORD hash and size; return {name: bytes}."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    dist = f"{engine_wheel.DIST_INFO}/"
    record = files[dist + "RECORD"].decode().splitlines()
    listed = {}
    for line in record:
        name, digest, size = line.rsplit(",", 2)
        listed[name] = (digest, size)
    assert set(listed) == set(files)
    assert listed[dist + "RECORD"] == ("", "")
    for name, payload in files.items():
        if name == dist + "RECORD":
            continue
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
        assert listed[name] == (want, str(len(payload))), name
    meta = files[dist + "METADATA"].decode()
    assert "Name: py_engine\n" in meta and "Version: 0.1.0\n" in meta
    assert "Root-Is-Purelib: true" in files[dist + "WHEEL"].decode()
    return files


def test_engine_wheel_route(client, repo):
    api = client.get("/api/engine").json()
    assert api["wheel"] == WHEEL_URL
    r = client.get(WHEEL_URL)
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert r.headers["etag"] == api["etag"] and r.headers["cache-control"] == "no-cache"
    assert_isolated(r.headers)
    files = check_wheel(r.content)
    assert files["py_engine/store/gguf.py"] == (repo / "py_engine" / "store" / "gguf.py").read_bytes()
    assert files["py_engine/shaders/matmul.wgsl"] == (repo / "shaders" / "matmul.wgsl").read_bytes()
    assert not any("__pycache__" in n for n in files)
    assert client.get(WHEEL_URL, headers={"If-None-Match": api["etag"]}).status_code == 304
    part = client.get(WHEEL_URL, headers={"Range": "bytes=0-3"})
    assert part.status_code == 206 and part.content == r.content[:4]


def test_engine_wheel_follows_source_edits(tmp_path, repo):
    copy = tmp_path / "repo"
    for part in ("py_engine", "shaders", "web"):
        shutil.copytree(repo / part, copy / part, symlinks=True)
    app = create_app(models_dir=None, repo_root=copy)
    server = LiveServer(app)
    try:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            first = c.get(WHEEL_URL)
            again = c.get(WHEEL_URL)
            assert again.content == first.content and again.headers["etag"] == first.headers["etag"]

            src = copy / "py_engine" / "store" / "gguf.py"
            src.write_text("MAGIC = b'GGUF'\nVERSION = 3\n")
            (copy / "shaders" / "rmsnorm.wgsl").write_text("// new kernel\n")
            edited = c.get(WHEEL_URL)
            assert edited.headers["etag"] != first.headers["etag"]
            files = check_wheel(edited.content)
            assert b"VERSION = 3" in files["py_engine/store/gguf.py"]
            assert files["py_engine/shaders/rmsnorm.wgsl"] == b"// new kernel\n"
            assert c.get("/api/engine").json()["etag"] == edited.headers["etag"]
            assert c.get("/api/models").json() == []
            assert c.get("/models/data.gguf").status_code == 404
    finally:
        server.close()


# --- the command ---------------------------------------------------------------------------------------------------

def test_serve_command_prints_url_and_serves(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF0123")
    proc = subprocess.Popen([sys.executable, "-m", "diskformer.cli", "serve", "--port", "0", "--models", str(tmp_path)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.fullmatch(r"diskformer: serving on (http://127\.0\.0\.1:(\d+)/)\n", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        with httpx.Client(base_url=m.group(1), timeout=10) as c:
            page = c.get("/")
            if (REPO / "web" / "index.html").is_file():
                assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            else:
                assert page.status_code == 404  # web/ is not written yet: the host still answers
            assert_isolated(page.headers)
            listed = c.get("/api/models").json()
            assert listed[0]["name"] == "m.gguf" and not listed[0]["builtin"]
            assert [m["name"] for m in listed[1:] if m["builtin"]] == ["diskformer-demo-qwen35moe-q8_0.gguf"]
            assert c.get("/models/m.gguf", headers={"Range": "bytes=4-"}).content == b"0123"
            check_wheel(c.get(WHEEL_URL).content)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()
