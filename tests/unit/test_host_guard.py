"""The host under abuse: huge Range numbers, idle and slowloris connections, a flood of sockets, foreign Host
headers (DNS rebinding) and a file that shrinks while it is sent. A real uvicorn on a free port, as `serve` runs it."""
import logging
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from diskformer.host_guard import GuardedH11Protocol, host_allowed
from diskformer.ranges import RangeNotSatisfiable, parse_range
from diskformer.server import create_app, server_config
from served_repo import make_repo


class FastGuard(GuardedH11Protocol):
    header_timeout = 0.6
    max_connections = 12


class GuardedServer:
    def __init__(self, app, protocol=FastGuard):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = server_config(app, log_config=None)
        config.http = protocol
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return s

    def close(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    repo = make_repo(tmp_path_factory.mktemp("guard"), with_big=False)
    server = GuardedServer(create_app(models_dir=repo / "models", repo_root=repo, allowed_hosts=["box.lan"]))
    yield server, repo
    server.close()


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1024) == b""
    except (socket.timeout, TimeoutError):
        return False
    except ConnectionResetError:
        return True


def test_range_numbers_of_thousands_of_digits_are_416_or_clamped_not_500(site):
    server, _ = site
    huge = "9" * 5000
    assert pytest.raises(RangeNotSatisfiable, parse_range, f"bytes={huge}-", 100)
    assert parse_range(f"bytes=10-{huge}", 100).end == 99
    assert parse_range(f"bytes=-{huge}", 100).start == 0
    with httpx.Client(base_url=server.url) as c:
        r = c.get("/models/data.gguf", headers={"Range": f"bytes={huge}-"})
        assert r.status_code == 416
        r = c.get("/models/data.gguf", headers={"Range": f"bytes=5-{huge}"})
        assert r.status_code == 206 and r.headers["content-range"].startswith("bytes 5-")
        r = c.get("/models/data.gguf", headers={"Range": f"bytes=0{huge}-1"})
        assert r.status_code == 416


def test_idle_and_slowloris_connections_are_closed_and_the_host_keeps_answering(site):
    server, _ = site
    idle = server.connect()
    slow = server.connect()
    t0 = time.monotonic()
    request = b"GET /models/data.gguf HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 40
    closed = False
    for byte in request:  # a byte every 50 ms: each arrival used to cancel the only timer uvicorn has
        try:
            slow.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        time.sleep(0.05)
    assert closed or closed_by_server(slow, 2), "a trickling request head was never cut off"
    assert closed_by_server(idle, 2), "an idle connection was never closed"
    assert time.monotonic() - t0 < 8
    # a request head sent in time is served, and a keep-alive connection still serves a second request
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/").status_code == 200
        assert c.get("/api/models").status_code == 200


def test_a_flood_of_connections_is_capped(site):
    server, _ = site
    socks = [server.connect() for _ in range(FastGuard.max_connections + 8)]
    try:
        closed = sum(closed_by_server(s, 0.3) for s in socks[-8:])
        assert closed >= 7, f"only {closed} of 8 connections past the cap were refused"
    finally:
        for s in socks:
            s.close()
    time.sleep(0.2)
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/api/models").status_code == 200


@pytest.mark.parametrize("host, ok", [
    ("evil.example", False), ("evil.example:8765", False), ("127.0.0.1.evil.example", False),
    ("localhost", True), ("localhost:8765", True), ("127.0.0.1:1", True), ("[::1]:8765", True),
    ("app.localhost", True), ("box.lan:80", True), ("BOX.LAN", True),
])
def test_only_loopback_addresses_and_given_names_are_answered(site, host, ok):
    server, _ = site
    assert host_allowed(host, {"box.lan"}) is ok
    with httpx.Client(base_url=server.url) as c:
        for path in ("/api/models", "/models/data.gguf"):
            r = c.get(path, headers={"Host": host, "Range": "bytes=0-3"})
            assert (r.status_code != 421) is ok, (host, path, r.status_code)
            if not ok:
                assert "localhost" in r.text and "allowed-host" in r.text


def test_a_file_that_shrinks_while_sent_ends_the_response_without_a_traceback(tmp_path, caplog):
    repo = make_repo(tmp_path, with_big=False)
    model = repo / "models" / "shrinks.gguf"
    model.write_bytes(b"x" * (8 << 20))
    server = GuardedServer(create_app(models_dir=repo / "models", repo_root=repo))
    try:
        with caplog.at_level(logging.WARNING):
            with httpx.Client(base_url=server.url, timeout=10) as c:
                with c.stream("GET", "/models/shrinks.gguf") as r:
                    assert r.status_code == 200
                    it = r.iter_raw(1 << 16)
                    next(it)
                    model.write_bytes(b"x" * 100)
                    with pytest.raises(httpx.HTTPError):
                        for _ in it:
                            pass
            time.sleep(0.3)
    finally:
        server.close()
    logged = "\n".join(rec.getMessage() + (rec.exc_text or "") + str(rec.exc_info or "") for rec in caplog.records)
    assert "shrank while being sent" in logged
    assert "Traceback" not in logged and not any(rec.exc_info for rec in caplog.records)
