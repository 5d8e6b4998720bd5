"""The host against a real uvicorn server on a free port: the range and path parsers, routes, headers, Range, bad
requests. The APIs, the engine wheel and the serve command: test_server_models.py.

Traversal cases go through a raw socket, since HTTP clients normalise `..` and re-encode paths before sending.
Each test uses a small throwaway repo root (tmp, served_repo.py) so it does not depend on the real web/ or models/.
"""
import asyncio
import os
import random
import re
import socket
import time
from email.utils import parsedate_to_datetime

import httpx
import pytest

from diskformer import engine_wheel
from diskformer.ranges import WHOLE, ByteRange, RangeNotSatisfiable, parse_range
from diskformer.safe_paths import BadRequestPath, NotServed, split_raw_path
from served_repo import (BIG_SIZE, GIB, SECRET, assert_isolated, assert_still_serving, client, live,  # noqa: F401
                         raw_request, repo)

WHEEL_URL = f"/wheels/{engine_wheel.WHEEL_NAME}"


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
