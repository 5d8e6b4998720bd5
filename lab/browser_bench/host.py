"""The bench page's host: `diskformer serve`'s app (diskformer/server.py, its routes unchanged) with one more mount,
/lab-bench/, for the bench run only:

  /lab-bench/<file>         this folder's page and worker (bench.html, bench_worker.js)
  /lab-bench/gpu/<file>     lab/browser_gpu/ (webgpu_costs.mjs: the adapter probe)
  /lab-bench/src/lab/...    the lab code the worker runs beside the engine (lab/__init__.py, lab/engine_bench/)
  /lab-bench/src.json       the list of those files, for the worker to copy into Pyodide's file system

The model's folder is the server's models folder: the tab reads the GGUF through /models/<name> with HTTP Range.
`BenchServer` runs it on 127.0.0.1 in a thread (uvicorn), for the length of a `with` block."""
import socket
import threading
import time
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse

from diskformer.safe_paths import BadRequestPath, NotServed, resolve_file, split_raw_path
from diskformer.server import ISOLATION_HEADERS, create_app, server_config
from diskformer.static_files import file_response

from .. import ENGINE_SIDE

LAB = Path(__file__).resolve().parents[1]
REPO = LAB.parent
MOUNT = "lab-bench"
ENGINE_SIDE_SUFFIXES = (".py", ".wgsl")


def engine_side_files() -> list:
    """The lab files the tab's worker imports, relative to the repo root (lab/__init__.py, lab/engine_bench/...)."""
    side = REPO / ENGINE_SIDE
    files = [p for p in sorted(side.rglob("*")) if p.is_file() and p.suffix in ENGINE_SIDE_SUFFIXES
             and "__pycache__" not in p.parts]
    return [(LAB / "__init__.py").relative_to(REPO).as_posix()] + [p.relative_to(REPO).as_posix() for p in files]


class BenchMount:
    """ASGI: /lab-bench/... answered here, everything else by the product's app."""

    def __init__(self, app):
        self.app = app
        self.allowed = set(engine_side_files())
        self.roots = {"gpu": LAB / "browser_gpu", "src": REPO}

    async def __call__(self, scope, receive, send):
        raw = scope.get("raw_path") or scope.get("path", "").encode()
        if scope["type"] != "http" or not raw.startswith(f"/{MOUNT}/".encode()):
            return await self.app(scope, receive, send)
        request = Request(scope, receive)
        try:
            segments = split_raw_path(raw)[1:]
            if request.method not in ("GET", "HEAD"):
                response = PlainTextResponse("405 the bench mount answers GET and HEAD only\n", status_code=405)
            elif segments == ["src.json"]:
                response = JSONResponse(sorted(self.allowed))
            else:
                response = self.file(request, segments)
        except (BadRequestPath, NotServed) as e:
            response = PlainTextResponse(f"404 not found: {e}\n", status_code=404)
        response.headers.update({**ISOLATION_HEADERS, "Cache-Control": "no-store"})
        await response(scope, receive, send)

    def file(self, request, segments):
        head = segments[0] if segments else ""
        if head == "src" and "/".join(segments[1:]) not in self.allowed:
            raise NotServed("not a file of the lab's engine side")
        root, parts = (self.roots[head], segments[1:]) if head in self.roots else (Path(__file__).parent, segments)
        path, st = resolve_file(root, parts)
        return file_response(request, path, st)


def bench_app(models_dir: Path):
    return BenchMount(create_app(models_dir))


def _listening_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        if not port:
            raise
        sock.bind(("127.0.0.1", 0))  # taken: any port (the tab's origin, and so its OPFS store, is then another)
    sock.listen(64)
    return sock


class BenchServer:
    """`with BenchServer(models_dir, port) as url:` the page's origin, served until the block ends."""

    def __init__(self, models_dir: Path, port: int = 0):
        self.models_dir, self.port = models_dir, port
        self.server = self.thread = self.sock = None

    def __enter__(self) -> str:
        import uvicorn

        self.sock = _listening_socket(self.port)
        self.server = uvicorn.Server(server_config(bench_app(self.models_dir)))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the bench page's server did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
        return False
