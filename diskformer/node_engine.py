"""Run Python code of the engine inside Pyodide in Node (WebGPU from Dawn) and get its JSON result back.

`run_in_node("py_engine.engine.cli_entry:run", {...})` calls an entry function; a string holding Python source
(it must define `main(args)`, sync or async) is run as a module. The runner is `diskformer/node/run_engine.mjs`;
one call costs a Node + Pyodide start (a few seconds), so tests batch their checks into one call.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "node" / "run_engine.mjs"
_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class NodeEngineError(RuntimeError):
    """The engine run failed: `stderr` holds the Python traceback or the runner's message."""

    def __init__(self, message: str, returncode: int, stderr: str):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def node_executable() -> str:
    node = os.environ.get("DISKFORMER_NODE") or shutil.which("node")
    if not node:
        raise NodeEngineError("node not found on PATH (set DISKFORMER_NODE)", 2, "")
    return node


def runner_command(target: str, args: dict, mounts=(), packages=()) -> tuple[list, str | None]:
    """The node command line for an entry `module:function` or a code string; returns (argv, temp file or None).

    `packages`: folders of the repo (e.g. "lab/engine_bench") copied beside py_engine for this run only."""
    # --expose-gc: the bench collects the JS heap between its timed phases (lab/engine_bench/js_gc_clock.py)
    argv = [node_executable(), "--expose-gc", str(RUNNER), "--args", json.dumps(args)]
    for m in mounts:
        argv += ["--mount", str(Path(m).resolve())]
    for p in packages:
        argv += ["--package", str(p)]
    if _ENTRY.match(target):
        return argv + ["--entry", target], None
    fd, tmp = tempfile.mkstemp(suffix=".py", prefix="engine_code_")
    with os.fdopen(fd, "w") as f:
        f.write(target)
    return argv + ["--code", tmp], tmp


def parse_result(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            try:
                return json.loads(line[len("RESULT "):])
            except ValueError as e:
                raise NodeEngineError(f"the runner's RESULT line is not valid JSON ({e}); "
                                      f"{len(line)} characters, ending {line[-80:]!r}", 1, "") from None
    raise NodeEngineError(f"no RESULT line in the runner's output (stdout ends {stdout[-200:]!r})", 1, "")


# libuv's thread pool serves the engine's parallel record reads (py_engine/store/node_reader.py); its default of 4
# threads caps how many reads are in flight at once
READ_THREADS = "16"


def runner_env() -> dict:
    env = dict(os.environ)
    env.setdefault("UV_THREADPOOL_SIZE", READ_THREADS)
    return env


def run_in_node(target: str, args: dict | None = None, mounts=(), timeout: float = 600, echo_stderr=False,
                packages=()) -> dict:
    """Run `target` (entry `module:function`, or Python source defining `main(args)`) in Pyodide + Dawn; `packages`
    are repo folders of Python code importable beside py_engine for this run (the bench's lab/engine_bench).

    Returns the entry's result (a JSON-able value); raises NodeEngineError with the traceback on failure."""
    argv, tmp = runner_command(target, args or {}, mounts, packages)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=runner_env())
    except subprocess.TimeoutExpired as e:
        raise NodeEngineError(f"engine run timed out after {timeout} s", 124, str(e.stderr or "")) from None
    finally:
        if tmp:
            os.unlink(tmp)
    if echo_stderr and proc.stderr:
        print(proc.stderr, end="")
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "(no message)"
        raise NodeEngineError(f"engine run failed (exit {proc.returncode}): {tail}\n{proc.stderr}",
                              proc.returncode, proc.stderr)
    return parse_result(proc.stdout)
