"""Running the gate's browser side: `diskformer serve` on a free port (when no --site is given) and the Node
driver (gate_driver.mjs, Playwright's Chromium from the repo's node_modules), all bounded by one deadline."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

DRIVER = Path(__file__).with_name("gate_driver.mjs")
SERVING = re.compile(r"serving on (http://\S+/)")


class GateStartError(RuntimeError):
    """The page or the engine could not be started (exit status 2)."""


class Deadline:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


class LocalServer:
    """`diskformer serve --port 0 --models DIR` as a child process; the URL is read from its first line."""

    def __init__(self, models_dir: Path, deadline: Deadline):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "diskformer.cli", "serve", "--port", "0", "--models", os.fspath(models_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.url = None
        lines = []
        while self.url is None:
            line = self.proc.stdout.readline()  # the server prints its URL before it accepts connections
            if not line:
                self.stop()
                raise GateStartError("diskformer serve exited before serving:\n" + "".join(lines[-20:]))
            lines.append(line)
            m = SERVING.search(line)
            if m:
                self.url = m.group(1)
            if deadline.left() <= 0:
                self.stop()
                raise TimeoutError("timed out starting diskformer serve")
        # keep reading what the server prints, so a full pipe never blocks it
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        self._wait_ready(deadline)

    def _wait_ready(self, deadline):
        while True:
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise GateStartError(f"diskformer serve exited with status {self.proc.returncode}")
            if deadline.left() <= 0:
                self.stop()
                raise TimeoutError(f"timed out waiting for {self.url}")
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def run_driver(site: str, source: dict, options: dict, conversations: list, deadline: Deadline) -> dict:
    """Run gate_driver.mjs; its JSON outcome (status ok / error / timeout). Raises GateStartError without Node."""
    node = shutil.which("node")
    if node is None:
        raise GateStartError("node is not on PATH: the gate drives Chromium through Node and @playwright/test")
    job = {"site": site, "timeout_s": max(1, int(deadline.left())), "source": source, "options": options,
           "conversations": conversations}
    with tempfile.TemporaryDirectory(prefix="diskformer-gate-") as tmp:
        job_path = Path(tmp, "job.json")
        job_path.write_text(json.dumps(job), encoding="utf-8")
        try:
            # the driver keeps its own deadline; the extra seconds let it report and close Chromium
            proc = subprocess.run([node, os.fspath(DRIVER), os.fspath(job_path)], capture_output=True, text=True,
                                  timeout=deadline.left() + 30)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "stage": "driver", "message": "the browser driver did not finish in time",
                    "results": [], "log": []}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise GateStartError(f"the browser driver failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])
