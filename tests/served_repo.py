"""A small throwaway repo root for the host's tests (web/, shaders/, py_engine/, vendor/, models/ and traps that
lead outside them), a live uvicorn serving it on a free port, raw-socket requests and the header checks, plus the
pytest fixtures over them (tests/unit/test_server*.py, test_host_guard.py)."""
import random
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from diskformer.server import create_app

GIB = 1 << 30
BIG_SIZE = 5 * GIB
SECRET = b"top-secret-outside-the-roots"


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
