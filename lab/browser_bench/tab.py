"""`diskformer bench --browser chromium`: the bench's entry (lab.engine_bench.entry:run) in the page's worker of a
headless Chromium tab instead of Node + Dawn.

The page is served by the product's own server with a bench-only mount (host.py); Playwright starts Chromium
(run_tab.mjs, the flag sets of lab/browser_gpu) and the tab's worker streams the GGUF from the host's Range
responses into a store in OPFS (a complete one, from an earlier run with the same --tab-profile and port, is
reused), then runs the same cases as the Node bench: "all" on the store engine with a pool holding every expert
(a tab cannot hold a file larger than wasm memory, so the GGUF engine's direct load is not used there) and each
pool fraction on the store engine. The raw result is the Node bench's, with "runner": "chromium" and a "browser"
record: Chromium's version, the flags, the adapter, Chromium's GPU facts and every flag set tried."""
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from diskformer.node_engine import node_executable, parse_result, NodeEngineError

RUN_TAB = Path(__file__).resolve().parent / "run_tab.mjs"
BROWSERS = ("chromium",)
# the tab's origin is the host's address and port: one fixed port keeps the same OPFS store from run to run
DEFAULT_PORT = 8779
CHROMIUM_NAMES = ("chromium", "chromium-headless-shell", "chromium-browser")


class TabBenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class TabOptions:
    chromium: str | None = None  # the browser's executable (default: $DISKFORMER_CHROMIUM, then chromium on PATH)
    flag_sets: str = "vulkan,vulkan-min,vulkan-angle-gl,default"
    want: str = "gpu"  # the adapter asked for: a vendor name, "gpu" (any non-fallback adapter) or "any"
    profile: Path | None = None  # Chromium's profile folder, kept between runs (the OPFS store lives there)
    port: int = DEFAULT_PORT
    timeout: float = 3600
    verbose: bool = False


def find_chromium(given: str | None) -> str:
    path = given or os.environ.get("DISKFORMER_CHROMIUM")
    if not path:
        path = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    if not path or not Path(path).exists():
        raise TabBenchError(f"no Chromium {'at ' + path if path else 'on PATH'}: give --chromium PATH (Debian's "
                            "chromium or chromium-headless-shell) or set DISKFORMER_CHROMIUM")
    return path


def default_profile() -> Path:
    return Path(tempfile.gettempdir()) / "diskformer-tab-bench-profile"


def store_folder(model: Path) -> str:
    """The OPFS folder of the model's store: one per file name and size, as the Node bench's store folders."""
    return f"bench-{model.stem}-{model.stat().st_size}"


def run_in_tab(model: Path, run: dict, opts: TabOptions) -> dict:
    """The entry's raw result for `run` (the Node bench's arguments), measured in a tab."""
    from .host import BenchServer  # the server's packages (starlette, uvicorn) only for a tab run

    chromium = find_chromium(opts.chromium)
    args = {k: v for k, v in run.items() if k not in ("store", "cpu_tier_url")}
    args["model"] = f"/models/{model.name}"
    payload = {"model_url": f"/models/{model.name}", "folder": store_folder(model), "args": args}
    profile = opts.profile or default_profile()
    profile.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(payload, f)
    try:
        with BenchServer(model.parent, opts.port) as url:
            argv = [node_executable(), str(RUN_TAB), "--url", url, "--chromium", chromium, "--payload", f.name,
                    "--profile", str(profile), "--flag-sets", opts.flag_sets, "--want", opts.want,
                    "--timeout", str(int(opts.timeout))]
            try:
                proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=None if opts.verbose else subprocess.PIPE,
                                      text=True, timeout=opts.timeout + 120)
            except subprocess.TimeoutExpired:
                raise TabBenchError(f"the tab's bench did not end in {opts.timeout + 120:.0f} s") from None
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        tail = (proc.stderr or "").strip().splitlines()[-5:]
        raise TabBenchError(f"the browser driver failed (exit {proc.returncode}): " + " | ".join(tail))
    try:
        out = parse_result(proc.stdout)
    except NodeEngineError as exc:
        raise TabBenchError(str(exc)) from None
    if out.get("bench") is None:
        log = (proc.stderr or "").strip().splitlines()[-8:]
        raise TabBenchError(f"the tab's bench failed: {out.get('error')}" + ("\n" + "\n".join(log) if log else ""))
    raw = out.pop("bench")
    raw["store"] = "opfs:" + payload["folder"]
    raw["browser"] = {"name": "chromium", "executable": chromium, "version": out["chromium_version"],
                      "flag_set": out["flag_set"], "flags": out["flags"], "adapter": out["adapter"],
                      "gpu": out["gpu"], "attempts": out["attempts"], "profile": str(profile),
                      "origin": url}
    return raw


def tab_summary(raw: dict) -> str:
    """The lines the table of a tab run starts with: the browser, its flags and adapter, the store and its ingest."""
    b, ing = raw["browser"], raw.get("ingest") or {}
    a = (b.get("adapter") or {}).get("adapter") or {}
    got = "reused (complete)" if ing.get("reused") else (
        f"ingested in {ing.get('s', 0):.1f} s" + (f" ({ing['MBps']:,.0f} MB/s)" if ing.get("MBps") else ""))
    resident = {"store_full_pool": "the store engine with every expert in its pool",
                "gguf": "the GGUF engine"}.get(raw.get("resident_engine"), "not run")
    return "\n".join([
        f"runner   Chromium tab: {b['version']}, flag set {b['flag_set']!r}: {' '.join(b['flags'])}",
        f"adapter  {a.get('vendor')} | {a.get('architecture')} | {a.get('description')}"
        + (" (fallback)" if a.get("isFallbackAdapter") else ""),
        f"store    {raw.get('store')}: {got}; resident case ('all'): {resident}", ""])
