"""`diskformer serve`: the Starlette host for the chat page, the engine, vendored Pyodide and local models.

Routes (GET/HEAD only, everything else 405):
  /                    web/index.html          /<file>          files under web/
  /shaders/<file>      shaders/                /py_engine/<p>   engine sources, read-only
  /pyodide/<file>      vendor/pyodide/         /wheels/<file>   vendor/wheels/ (micropip)
  /wheels/py_engine-0.1.0-py3-none-any.whl     the engine wheel, built in memory from py_engine/ + shaders/
  /models/<name>       the models folder, then the built-in demo model(s) in demo/ (CORS open, HTTP Range)
  /api/models          JSON [{name, size, mtime, builtin}] of the *.gguf files /models/ serves
  /api/engine          JSON {wheel, etag, size} of the current engine wheel

Every response carries COOP/COEP/CORP so the page is cross-origin isolated (SharedArrayBuffer, precise timers) and
a worker may load anything it serves. Paths are decoded from the raw request path by safe_paths, never from the
already-decoded one, so nothing outside the served folders can be reached.
"""
import argparse
import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from diskformer import engine_wheel
from diskformer.host_guard import KEEP_ALIVE_S, GuardedH11Protocol, host_allowed, raise_file_limit
from diskformer.safe_paths import BadRequestPath, NotServed, resolve_file, split_raw_path
from diskformer.static_files import FileShrank, bytes_response, file_response

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PORT = 8765

ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "cross-origin",
    "X-Content-Type-Options": "nosniff",
}
# Model files may be streamed by a page on another origin (e.g. a dev server); let it read the range headers too.
MODEL_CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "Content-Range, Content-Length, ETag, Accept-Ranges, Last-Modified",
}
ALLOWED_METHODS = ("GET", "HEAD")


class IsolationHeaders:
    """ASGI middleware: add the cross-origin isolation headers to every response that lacks them."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in ISOLATION_HEADERS.items()
                         if k.lower().encode() not in present]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _error(status: int, message: str, headers=None) -> Response:
    return PlainTextResponse(f"{status} {message}\n", status_code=status, headers=headers)


class Host:
    """The whole site as one ASGI endpoint: routing on the raw path's first segment, then a vetted file."""

    def __init__(self, repo_root, models_dir, builtin_dir=None, allowed_hosts=()):
        self.repo_root = Path(repo_root)
        self.allowed_hosts = {h.lower().rstrip(".") for h in allowed_hosts}
        self.models_dir = Path(models_dir) if models_dir is not None else None
        # The built-in demo model ships in demo/: always served, so the page chats offline with nothing downloaded.
        # A file of the same name in the models folder wins.
        self.builtin_dir = Path(builtin_dir) if builtin_dir is not None else self.repo_root / "demo"
        self.wheels = engine_wheel.WheelCache(self.repo_root)
        root = self.repo_root
        self.roots = {
            "shaders": root / "shaders",
            "py_engine": root / "py_engine",
            "pyodide": root / "vendor" / "pyodide",
            "wheels": root / "vendor" / "wheels",
            "models": self.models_dir,
        }
        self.web = root / "web"

    async def __call__(self, scope, receive, send):
        request = Request(scope, receive)
        if not host_allowed(request.headers.get("host"), self.allowed_hosts):
            response = _error(421, "this host answers only to localhost, IP addresses and the names given with "
                                   "--host or --allowed-host")
        else:
            response = await self.respond(request)
        try:
            await response(scope, receive, send)
        except FileShrank as e:
            # the status and length are sent; closing the connection short is all that is left to do
            logging.getLogger("diskformer.host").warning("%s", e)

    async def respond(self, request: Request) -> Response:
        scope = request.scope
        raw_path = scope.get("raw_path") or scope["path"].encode("utf-8")
        try:
            segments = split_raw_path(raw_path)
        except BadRequestPath as e:
            return _error(400, f"bad request path: {e}")
        except NotServed as e:
            return _error(404, f"not found: {e}")
        head, rest = (segments[0], segments[1:]) if segments else ("", [])
        extra = MODEL_CORS_HEADERS if head == "models" else {}

        if request.method == "OPTIONS" and head == "models" and "access-control-request-method" in request.headers:
            return self.model_preflight(request)
        if request.method not in ALLOWED_METHODS:
            return _error(405, f"method {request.method} not allowed", {"Allow": ", ".join(ALLOWED_METHODS), **extra})

        if head == "api" and rest == ["models"]:
            return JSONResponse(await anyio.to_thread.run_sync(self.list_models))
        if head == "api" and rest == ["engine"]:
            wheel = await anyio.to_thread.run_sync(self.wheels.current)
            return JSONResponse({"wheel": f"/wheels/{engine_wheel.WHEEL_NAME}", "etag": wheel.etag,
                                 "size": len(wheel.data)})
        if head == "wheels" and rest == [engine_wheel.WHEEL_NAME]:
            wheel = await anyio.to_thread.run_sync(self.wheels.current)
            return bytes_response(request, wheel.data, engine_wheel.WHEEL_NAME, wheel.etag, wheel.built_at)

        if head in self.roots:
            root, parts = self.roots[head], rest
        elif head == "api":
            return _error(404, "not found: no such API")
        else:
            root, parts = self.web, (segments or ["index.html"])
        try:
            path, st = await anyio.to_thread.run_sync(self.resolve, head, root, parts)
        except NotServed as e:
            return _error(404, f"not found: {e}", extra)
        return file_response(request, path, st, extra)

    def resolve(self, head, root, parts):
        """A vetted file; /models/<name>.gguf falls back to the built-in folder (top-level GGUFs only)."""
        try:
            return resolve_file(root, parts)
        except NotServed:
            if head != "models" or len(parts) != 1 or not parts[0].endswith(".gguf"):
                raise
            return resolve_file(self.builtin_dir, parts)

    def model_preflight(self, request: Request) -> Response:
        """CORS preflight for /models/ (a suffix Range like `bytes=-n` is not a CORS-safelisted header)."""
        asked = request.headers["access-control-request-method"].strip().upper()
        if asked not in ALLOWED_METHODS:
            return _error(405, f"method {asked} not allowed", {"Allow": ", ".join(ALLOWED_METHODS), **MODEL_CORS_HEADERS})
        return Response(status_code=204, headers={
            **MODEL_CORS_HEADERS,
            "Access-Control-Allow-Methods": ", ".join(ALLOWED_METHODS),
            "Access-Control-Allow-Headers": "Range, If-Range, If-None-Match",
            "Access-Control-Max-Age": "600",
        })

    def list_models(self) -> list:
        """Every *.gguf that /models/<name> would actually serve: the models folder's (subfolders too), sorted by
        name, then the built-in ones it does not shadow (`builtin: true`)."""
        found = self._list_folder(self.models_dir, recursive=True)
        taken = {m["name"] for m in found}
        builtin = [{**m, "builtin": True} for m in self._list_folder(self.builtin_dir, recursive=False)
                   if m["name"] not in taken]
        return found + builtin

    @staticmethod
    def _list_folder(folder, recursive) -> list:
        if folder is None or not folder.is_dir():
            return []
        found = []
        walk = os.walk(folder) if recursive else [(folder, None, [p.name for p in folder.iterdir()])]
        paths = (Path(d, f) for d, _, files in walk for f in files if f.endswith(".gguf"))
        for path in paths:  # os.walk does not descend into symlinked folders, so a link loop cannot trap it
            name = path.relative_to(folder).as_posix()
            try:
                _, st = resolve_file(folder, split_raw_path(("/" + name).encode("utf-8")))
            except (NotServed, BadRequestPath):
                continue  # hidden, a directory, or a symlink leading out of the folder: not served, not listed
            found.append({"name": name, "size": st.st_size, "mtime": st.st_mtime, "builtin": False})
        return sorted(found, key=lambda m: m["name"])


async def _server_error(request, exc) -> Response:
    # ServerErrorMiddleware sits outside our middleware, so this response carries the isolation headers itself.
    return PlainTextResponse(f"500 internal error: {type(exc).__name__}\n", status_code=500, headers=ISOLATION_HEADERS)


def create_app(models_dir=None, repo_root=REPO_ROOT, builtin_dir=None, allowed_hosts=()) -> Starlette:
    """The ASGI app; `repo_root` is the folder holding web/, shaders/, py_engine/, vendor/ and demo/ (the built-in
    models; `builtin_dir` overrides it). Requests are answered for localhost, IP addresses and `allowed_hosts`."""
    host = Host(repo_root, models_dir, builtin_dir, allowed_hosts)
    app = Starlette(
        routes=[Route("/{path:path}", endpoint=host)],
        middleware=[Middleware(IsolationHeaders)],
        exception_handlers={Exception: _server_error},
    )
    app.state.host = host
    return app


def server_config(app, **kw):
    """uvicorn's configuration for the host: h11 with the header deadline and connection cap, short keep-alive."""
    import uvicorn

    return uvicorn.Config(app, log_level="warning", lifespan="off", http=GuardedH11Protocol,
                          timeout_keep_alive=KEEP_ALIVE_S, **kw)


def default_models_dir():
    candidate = REPO_ROOT / "models"
    return candidate if candidate.is_dir() else None


def _listening_socket(host: str, port: int) -> socket.socket:
    """Bind and listen before printing the URL, so the URL is connectable the moment anyone reads it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise SystemExit(f"diskformer serve: cannot listen on {host}:{port}: {e.strerror or e}")
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def main(argv=None) -> int:
    import uvicorn  # only this command needs it

    parser = argparse.ArgumentParser(prog="diskformer serve", description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=None,
                        help="folder of model files served at /models/ (default: models/ at the repo root, if any)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="also answer requests for this host name (besides localhost and IP addresses); repeat "
                             "for several")
    parser.add_argument("--access-log", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"diskformer serve: --port {args.port} is not a TCP port (0-65535; 0 = any free)", file=sys.stderr)
        return 2

    models_dir = args.models if args.models is not None else default_models_dir()
    if models_dir is not None and not models_dir.is_dir():
        print(f"diskformer serve: --models {models_dir} is not a folder", file=sys.stderr)
        return 2
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(f"diskformer serve: warning: listening on {args.host}, not loopback; anyone who can reach it "
              "can read the served folders", file=sys.stderr)

    sock = _listening_socket(args.host, args.port)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"diskformer: serving on http://{shown}:{port}/", flush=True)
    print(f"diskformer: models from {os.fspath(models_dir) if models_dir else '(none; pass --models DIR)'}"
          f", plus the built-in demo model", flush=True)

    raise_file_limit()
    config = server_config(create_app(models_dir, allowed_hosts=[args.host, *args.allowed_host]),
                           access_log=args.access_log)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn re-raises Ctrl-C after its graceful shutdown; stopping the host that way is a normal exit
    print("diskformer: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
