"""The host against a real uvicorn server on a free port: routes, headers, Range, bad requests, the engine wheel.

Traversal cases go through a raw socket, since HTTP clients normalise `..` and re-encode paths before sending.
Each test uses a small throwaway repo root (tmp) so it does not depend on the real web/ or models/.
"""
import asyncio
import base64
import hashlib
import io
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest
import uvicorn

from diskformer import engine_wheel
from diskformer.ranges import WHOLE, ByteRange, RangeNotSatisfiable, parse_range
from diskformer.safe_paths import BadRequestPath, NotServed, split_raw_path
from diskformer.server import create_app

REPO = Path(__file__).resolve().parents[2]
GIB = 1 << 30
BIG_SIZE = 5 * GIB
SECRET = b"top-secret-outside-the-roots"
WHEEL_URL = f"/wheels/{engine_wheel.WHEEL_NAME}"


class LiveServer:
    """uvicorn serving `app` from a background thread on a free 127.0.0.1 port."""

    def __init__(self, app):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", http="h11")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)

    def close(self):
        self.server.should_exit = True
        self.thread.join(10)


def make_repo(root: Path, with_big=True) -> Path:
    """A minimal repo root: web/, shaders/, py_engine/, vendor/, models/ and traps that lead outside them."""
    (root / "web" / "sub").mkdir(parents=True)
    (root / "web" / "index.html").write_text("<!doctype html><title>diskformer test</title>")
    (root / "web" / "app.js").write_text("export const x = 1;\n")
    (root / "web" / "worker.mjs").write_text("self.onmessage = () => {};\n")
    (root / "web" / "style.css").write_text("body { margin: 0 }\n")
    (root / "web" / "sub" / "page.json").write_text('{"ok": true}')
    (root / "shaders").mkdir()
    (root / "shaders" / "matmul.wgsl").write_text("@compute @workgroup_size(64) fn main() {}\n")
    (root / "py_engine" / "store").mkdir(parents=True)
    (root / "py_engine" / "__init__.py").write_text('"""engine"""\n')
    (root / "py_engine" / "store" / "gguf.py").write_text("MAGIC = b'GGUF'\n")
    (root / "py_engine" / "store" / "__pycache__").mkdir()
    (root / "py_engine" / "store" / "__pycache__" / "gguf.cpython-311.pyc").write_bytes(b"\0" * 16)
    (root / "vendor" / "pyodide").mkdir(parents=True)
    (root / "vendor" / "pyodide" / "pyodide.asm.wasm").write_bytes(b"\0asm\1\0\0\0")
    (root / "vendor" / "pyodide" / "pyodide.mjs").write_text("export {};\n")
    (root / "vendor" / "wheels").mkdir()
    (root / "vendor" / "wheels" / "micropip-0.11.1-py3-none-any.whl").write_bytes(b"PK\5\6" + b"\0" * 18)
    models = root / "models"
    (models / "sub").mkdir(parents=True)
    (models / "data.gguf").write_bytes(random.Random(7).randbytes(3 * (1 << 20) + 12345))
    (models / "sub" / "tiny.gguf").write_bytes(b"GGUF-tiny")
    (models / "empty.gguf").write_bytes(b"")
    (models / ".hidden.gguf").write_bytes(b"hidden")
    (root / "secret.txt").write_bytes(SECRET)
    (root / "outside").mkdir()
    (root / "outside" / "file.txt").write_bytes(SECRET)
    (root / "web" / "escape.txt").symlink_to("../secret.txt")
    (root / "web" / "linkdir").symlink_to("../outside", target_is_directory=True)
    (models / "escape.gguf").symlink_to("../secret.txt")
    (root / "web" / "inside-link.js").symlink_to("app.js")
    if with_big:
        # A sparse 5 GiB file with known bytes on both sides of 4 GiB and at the very end.
        with open(models / "big.gguf", "wb") as f:
            f.truncate(BIG_SIZE)
            f.seek(4 * GIB - 8)
            f.write(b"ABCDEFGHIJKLMNOP")
            f.seek(BIG_SIZE - 8)
            f.write(b"tail-end")
    return root


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def live(repo):
    server = LiveServer(create_app(models_dir=repo / "models", repo_root=repo))
    yield server
    server.close()


@pytest.fixture()
def client(live):
    with httpx.Client(base_url=live.url, timeout=10) as c:
        yield c


def raw_request(port: int, target: bytes, method: bytes = b"GET", headers=(), body: bytes = b""):
    """Send one request byte for byte and return (status, {lower-name: value}, body)."""
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += [h.encode("latin-1") if isinstance(h, str) else h for h in headers]
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split()[1])
    hdrs = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        hdrs[name.strip().lower()] = value.strip()
    return status, hdrs, payload


def assert_isolated(headers):
    assert headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["cross-origin-embedder-policy"] == "require-corp"
    assert headers["cross-origin-resource-policy"] == "cross-origin"


def assert_still_serving(port):
    status, _, body = raw_request(port, b"/")
    assert status == 200 and b"diskformer test" in body


# --- unit level: the parsers the responder relies on ------------------------------------------------------------

@pytest.mark.parametrize("header,size,want", [
    (None, 10, WHOLE),
    ("bytes=0-0", 10, ByteRange(0, 0, 10)),
    ("bytes=2-5", 10, ByteRange(2, 5, 10)),
    ("bytes=2-", 10, ByteRange(2, 9, 10)),
    ("bytes=-3", 10, ByteRange(7, 9, 10)),
    ("bytes=-30", 10, ByteRange(0, 9, 10)),
    ("bytes=5-99", 10, ByteRange(5, 9, 10)),
    (" Bytes = 1-2 ", 10, ByteRange(1, 2, 10)),
    ("bytes=0-1,4-5", 10, WHOLE),
    ("bytes=4294967290-4294967299", 5 * GIB, ByteRange(4294967290, 4294967299, 5 * GIB)),
])
def test_parse_range_accepts(header, size, want):
    assert parse_range(header, size) == want


@pytest.mark.parametrize("header", [
    "bytes=10-", "bytes=11-12", "bytes=5-4", "bytes=-0", "bytes=", "bytes=-", "bytes=abc", "bytes=1-2-3",
    "bytes=+1-2", "bytes=1_0-20", "bytes=\u0663-4", "items=0-1", "0-1", "bytes=0-1,x", "bytes=0-1,20-30",
])
def test_parse_range_refuses(header):
    with pytest.raises(RangeNotSatisfiable):
        parse_range(header, 10)


def test_split_raw_path_rules():
    assert split_raw_path(b"/") == []
    assert split_raw_path(b"/models/a%20b/c.gguf") == ["models", "a b", "c.gguf"]
    assert split_raw_path("/caf%C3%A9".encode()) == ["café"]
    for bad in (b"/%zz", b"/%e0%a4", b"/%", b"/a%4", b"/%c0%af", b"/%ff"):
        with pytest.raises(BadRequestPath):
            split_raw_path(bad)
    for refused in (b"/..", b"/a/%2e%2E/b", b"/a%2fb", b"//etc/passwd", b"/a\\b", b"/a%5cb", b"/a%00", b"/a/",
                    b"/.git/config", b"relative"):
        with pytest.raises(NotServed):
            split_raw_path(refused)


# --- routes, MIME types and headers ------------------------------------------------------------------------------

@pytest.mark.parametrize("path,mime,needle", [
    ("/", "text/html", b"diskformer test"),
    ("/app.js", "text/javascript", b"export const"),
    ("/worker.mjs", "text/javascript", b"onmessage"),
    ("/style.css", "text/css", b"margin"),
    ("/sub/page.json", "application/json", b'"ok"'),
    ("/inside-link.js", "text/javascript", b"export const"),
    ("/shaders/matmul.wgsl", "text/plain", b"@compute"),
    ("/py_engine/store/gguf.py", "text/x-python", b"MAGIC"),
    ("/pyodide/pyodide.asm.wasm", "application/wasm", b"\0asm"),
    ("/pyodide/pyodide.mjs", "text/javascript", b"export"),
    ("/wheels/micropip-0.11.1-py3-none-any.whl", "application/zip", b"PK"),
    ("/models/sub/tiny.gguf", "application/octet-stream", b"GGUF-tiny"),
])
def test_routes_serve_files(client, path, mime, needle):
    r = client.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].split(";")[0] == mime
    assert needle in r.content[:64]
    assert_isolated(r.headers)
    assert r.headers["accept-ranges"] == "bytes"
    assert int(r.headers["content-length"]) == len(r.content)


def test_models_are_cors_open(client):
    r = client.get("/models/sub/tiny.gguf", headers={"Origin": "http://elsewhere.example"})
    assert r.headers["access-control-allow-origin"] == "*"
    exposed = {h.strip().lower() for h in r.headers["access-control-expose-headers"].split(",")}
    assert {"content-range", "content-length", "etag", "accept-ranges"} <= exposed
    assert client.get("/app.js").headers.get("access-control-allow-origin") is None
    pre = client.options("/models/data.gguf", headers={"Origin": "http://elsewhere.example",
                                                       "Access-Control-Request-Method": "GET",
                                                       "Access-Control-Request-Headers": "range"})
    assert pre.status_code == 204
    assert "range" in pre.headers["access-control-allow-headers"].lower()


def test_validators_are_stable_and_track_changes(client, repo):
    target = repo / "web" / "mutable.txt"
    target.write_text("first")
    a, b = client.get("/mutable.txt"), client.get("/mutable.txt")
    assert a.headers["etag"] == b.headers["etag"] and re.fullmatch(r'"[^"]+"', a.headers["etag"])
    st = target.stat()
    assert parsedate_to_datetime(a.headers["last-modified"]).timestamp() == int(st.st_mtime)
    assert client.get("/mutable.txt", headers={"If-None-Match": a.headers["etag"]}).status_code == 304
    target.write_text("second!")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    c = client.get("/mutable.txt", headers={"If-None-Match": a.headers["etag"]})
    assert c.status_code == 200 and c.text == "second!" and c.headers["etag"] != a.headers["etag"]


# --- ranges ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,start,end", [
    ("0-0", 0, 0), ("0-9", 0, 9), ("1000-1048675", 1000, 1048675), ("1048571-2097160", 1048571, 2097160),
    ("3145000-", 3145000, None), ("-100", -100, None), ("-99999999", 0, None), ("3000000-99999999", 3000000, None),
])
def test_single_ranges(client, repo, spec, start, end):
    data = (repo / "models" / "data.gguf").read_bytes()
    size = len(data)
    first = start if start >= 0 else size + start
    last = size - 1 if end is None else end
    r = client.get("/models/data.gguf", headers={"Range": f"bytes={spec}"})
    assert r.status_code == 206
    assert r.headers["content-range"] == f"bytes {first}-{last}/{size}"
    assert int(r.headers["content-length"]) == last - first + 1
    assert r.content == data[first:last + 1]


def test_no_range_and_multi_range_give_the_whole_file(client, repo):
    data = (repo / "models" / "data.gguf").read_bytes()
    for headers in ({}, {"Range": "bytes=0-1,10-20"}):
        r = client.get("/models/data.gguf", headers=headers)
        assert r.status_code == 200 and r.content == data and "content-range" not in r.headers


@pytest.mark.parametrize("spec", ["bytes=3158073-", "bytes=99999999-", "bytes=20-10", "bytes=-0", "bytes=abc",
                                  "bytes=", "bytes=1-2-3", "items=0-5", "bytes=0-1,zz"])
def test_unsatisfiable_ranges(live, spec):
    status, headers, _ = raw_request(live.port, b"/models/data.gguf", headers=[f"Range: {spec}"])
    assert status == 416
    assert headers["content-range"] == f"bytes */{3 * (1 << 20) + 12345}"
    assert_isolated(headers)
    assert_still_serving(live.port)


def test_empty_file(client):
    r = client.get("/models/empty.gguf")
    assert r.status_code == 200 and r.content == b"" and r.headers["content-length"] == "0"
    r = client.get("/models/empty.gguf", headers={"Range": "bytes=0-"})
    assert r.status_code == 416 and r.headers["content-range"] == "bytes */0"


def test_head_sends_headers_only(live):
    status, h, body = raw_request(live.port, b"/models/data.gguf", method=b"HEAD")
    assert status == 200 and body == b"" and h["content-length"] == str(3 * (1 << 20) + 12345)
    assert h["accept-ranges"] == "bytes" and h["etag"] and h["last-modified"]
    status, h, body = raw_request(live.port, b"/models/data.gguf", method=b"HEAD", headers=["Range: bytes=10-19"])
    assert status == 206 and body == b"" and h["content-length"] == "10"
    assert h["content-range"].startswith("bytes 10-19/")


def test_if_range(client):
    etag = client.head("/models/data.gguf").headers["etag"]
    assert client.get("/models/data.gguf", headers={"Range": "bytes=0-3", "If-Range": etag}).status_code == 206
    stale = client.get("/models/data.gguf", headers={"Range": "bytes=0-3", "If-Range": '"stale"'})
    assert stale.status_code == 200 and len(stale.content) == 3 * (1 << 20) + 12345


def test_ranges_past_4_gib(client):
    h = client.head("/models/big.gguf")
    assert h.status_code == 200 and int(h.headers["content-length"]) == BIG_SIZE
    r = client.get("/models/big.gguf", headers={"Range": f"bytes={4 * GIB - 8}-{4 * GIB + 7}"})
    assert r.status_code == 206 and r.content == b"ABCDEFGHIJKLMNOP"
    assert r.headers["content-range"] == f"bytes {4 * GIB - 8}-{4 * GIB + 7}/{BIG_SIZE}"
    r = client.get("/models/big.gguf", headers={"Range": f"bytes={4 * GIB}-{4 * GIB + 3}"})
    assert r.content == b"IJKL"
    r = client.get("/models/big.gguf", headers={"Range": "bytes=-8"})
    assert r.content == b"tail-end" and r.headers["content-range"] == f"bytes {BIG_SIZE - 8}-{BIG_SIZE - 1}/{BIG_SIZE}"
    r = client.get("/models/big.gguf", headers={"Range": f"bytes={BIG_SIZE}-"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{BIG_SIZE}"


def test_full_get_of_a_huge_file_streams(live):
    """Headers and the first bytes of a 5 GiB body come at once; hanging up early leaves the server serving."""
    t0 = time.monotonic()
    with httpx.Client(base_url=live.url, timeout=10) as c, c.stream("GET", "/models/big.gguf") as r:
        assert r.status_code == 200 and int(r.headers["content-length"]) == BIG_SIZE
        got = 0
        for chunk in r.iter_raw():
            got += len(chunk)
            if got >= 3 << 20:
                break
    assert time.monotonic() - t0 < 5
    assert_still_serving(live.port)


def test_fifty_concurrent_ranges(live, repo):
    data = (repo / "models" / "data.gguf").read_bytes()
    rng = random.Random(1234)
    spans = []
    for _ in range(50):
        start = rng.randrange(len(data))
        spans.append((start, min(len(data) - 1, start + rng.randrange(1, 1_500_000))))

    async def fetch_all():
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(base_url=live.url, timeout=20, limits=limits) as c:
            return await asyncio.gather(*(c.get("/models/data.gguf", headers={"Range": f"bytes={a}-{b}"})
                                          for a, b in spans))

    for (a, b), r in zip(spans, asyncio.run(fetch_all())):
        assert r.status_code == 206 and r.headers["content-range"] == f"bytes {a}-{b}/{len(data)}"
        assert r.content == data[a:b + 1]


# --- bad requests: the right status, nothing outside the roots, and the server keeps serving ---------------------

@pytest.mark.parametrize("target,status", [
    (b"/%zz", 400), (b"/%e0%a4", 400), (b"/%", 400), (b"/app.js%4", 400), (b"/models/%c0%afx", 400),
    (b"/%ff.js", 400),
    (b"/../secret.txt", 404), (b"/%2e%2e/secret.txt", 404), (b"/%2E%2E/secret.txt", 404),
    (b"/shaders/..%2fsecret.txt", 404), (b"/shaders/%2e%2e%2fsecret.txt", 404),
    (b"/models/..%2F..%2Fsecret.txt", 404), (b"/py_engine/../secret.txt", 404), (b"/./app.js", 404),
    (b"//etc/passwd", 404), (b"/%2fetc%2fpasswd", 404), (b"/shaders/..\\..\\secret.txt", 404),
    (b"/shaders/%5c..%5csecret.txt", 404), (b"/app.js%00", 404), (b"/app.js%00.html", 404),
    (b"/escape.txt", 404), (b"/linkdir/file.txt", 404), (b"/models/escape.gguf", 404),
    (b"/missing.js", 404), (b"/sub", 404), (b"/sub/", 404), (b"/shaders", 404), (b"/shaders/", 404),
    (b"/models/.hidden.gguf", 404), (b"/api/nothing", 404), (b"/py_engine/store/__pycache__", 404),
])
def test_bad_paths(live, target, status):
    got, headers, body = raw_request(live.port, target)
    assert got == status, (target, body)
    assert SECRET not in body
    assert_isolated(headers)
    assert_still_serving(live.port)


@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"TRACE"])
def test_other_methods_are_refused(live, method):
    for target in (b"/", b"/models/data.gguf", b"/api/models", WHEEL_URL.encode()):
        status, headers, _ = raw_request(live.port, target, method=method, body=b"x=1" if method != b"TRACE" else b"")
        assert status == 405 and headers["allow"] == "GET, HEAD"
    assert_still_serving(live.port)


@pytest.mark.parametrize("line", [b"GET /\xff\xfe HTTP/1.1", b"GET /app.js\x00 HTTP/1.1", b"GET / HTTP/9"])
def test_garbage_request_line_does_not_stop_the_server(live, line):
    # Raw (unencoded) bytes the HTTP parser itself refuses never reach the app; uvicorn answers 400.
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:
        s.sendall(line + b"\r\nHost: x\r\n\r\n")
        reply = s.recv(65536)
    assert reply.startswith(b"HTTP/1.1 400") and SECRET not in reply
    assert_still_serving(live.port)


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
