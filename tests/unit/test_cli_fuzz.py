"""Every command-line entry point over corrupted GGUFs and stores: each answer is either a success with sound
output (JSON without NaN) or one readable line on stderr and a non-zero exit; never a traceback, a hang, an
"unexpected error" (the last-resort catch in diskformer/cli.py) or NaN.

The corpora (tests/cli_corpus.py) are made from the micro fixtures with a fixed seed. Commands run in-process (a
subprocess each would cost a Python start per input); a sample runs as real subprocesses, and `run` (which starts
Pyodide in Node, seconds per input) runs in-process on inputs its up-front checks refuse and as a subprocess on a
sample of the rest. The counts are printed (pytest -s) and recorded in docs/reliability.md.
"""
import contextlib
import io
import json
import random
import shutil
import signal
import subprocess
import sys
import warnings

import pytest

from cli_corpus import gguf_corpus, store_corpus
from diskformer.cli import main as cli
from py_engine.gguf import GGUFError, check_supported, read_gguf_file
from py_engine.store.check import StoreDamaged, read_store_manifest

HANG_SECONDS = 20  # per command; the micro models answer in well under a second


def _no_nan(text):
    def refuse(name):
        raise AssertionError(f"{name} in the output")
    json.loads(text, parse_constant=refuse)


@contextlib.contextmanager
def hang_guard(seconds=HANG_SECONDS):
    def timeout(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, timeout)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Tally:
    def __init__(self):
        self.inputs, self.calls, self.clean_errors, self.successes = 0, 0, 0, 0

    def check(self, label, argv, rc, out, err, json_out):
        self.calls += 1
        where = f"{label}: diskformer {' '.join(map(str, argv))}"
        assert "Traceback" not in err and "unexpected error" not in err, f"{where}\n{err}"
        if rc == 0:
            self.successes += 1
            if json_out:
                _no_nan(out)
            assert "NaN" not in out, where
            return
        self.clean_errors += 1
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"diskformer {argv[0]}:"), f"{where}\n{err}"
        assert not out.strip(), f"{where} printed output and failed"

    def run(self, label, argv, json_out=True):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), hang_guard(), \
                warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a subprocess would print it: one more stderr line
            rc = cli([str(a) for a in argv])
        self.check(label, argv, rc, out.getvalue(), err.getvalue(), json_out)
        return rc


def subprocess_check(tally, label, argv, json_out=True):
    proc = subprocess.run([sys.executable, "-m", "diskformer.cli", *map(str, argv)], capture_output=True,
                          text=True, timeout=300)
    tally.check(label, argv, proc.returncode, proc.stdout, proc.stderr, json_out)


def passes_run_checks(path) -> bool:
    try:
        check_supported(read_gguf_file(path))
        return True
    except (OSError, GGUFError):
        return False


@pytest.fixture(scope="module")
def report():
    tallies = {}
    yield tallies
    for name, t in tallies.items():
        print(f"\n{name}: {t.inputs} inputs, {t.calls} command runs, {t.clean_errors} clean errors, "
              f"{t.successes} sound successes")


@pytest.mark.parametrize("seed_name", ["micro-qwen3moe.gguf", "micro-qwen35moe.gguf"])
def test_corrupted_ggufs(fixture_models, tmp_path, report, seed_name):
    tally = report.setdefault(f"GGUF {seed_name}", Tally())
    path = tmp_path / "bad.gguf"
    to_node, to_subprocess = [], []
    for i, (label, write) in enumerate(gguf_corpus(fixture_models / seed_name, random.Random(47), 90)):
        write(path)
        tally.inputs += 1
        tally.run(label, ["tokenize", path, "Hello, world"])
        tally.run(label, ["detokenize", path, "[1, 2, 3]"])
        tally.run(label, ["reference", path, "--ids", "1,2,3", "--n", "2", "--top", "3"])
        store = tmp_path / f"store{i}"
        if tally.run(label, ["ingest", "--quiet", path, store], json_out=False) == 0:
            tally.run(label, ["verify", store], json_out=False)
        shutil.rmtree(store, ignore_errors=True)
        if passes_run_checks(path):
            if label.startswith(("NaN", "inf")) and len(to_node) < 1:
                to_node.append((label, path.read_bytes()))
        else:
            tally.run(label, ["run", path, "--ids", "1,2,3", "--n", "2"])
        if i % 40 == 7:
            to_subprocess.append((label, path.read_bytes()))
    for j, (label, data) in enumerate(to_subprocess):
        sample = tmp_path / f"sample{j}.gguf"
        sample.write_bytes(data)
        subprocess_check(tally, label, ["reference", sample, "--ids", "1,2", "--n", "2"])
        subprocess_check(tally, label, ["tokenize", sample, "hi"])
    if shutil.which("node"):
        for j, (label, data) in enumerate(to_node):
            sample = tmp_path / f"node{j}.gguf"
            sample.write_bytes(data)
            subprocess_check(tally, label, ["run", sample, "--ids", "1,2,3", "--n", "2"])
    assert tally.clean_errors >= 100


def test_corrupted_stores(fixture_models, tmp_path, report):
    tally = report.setdefault("stores of micro-qwen35moe.gguf", Tally())
    clean = tmp_path / "clean"
    assert cli(["ingest", "--quiet", str(fixture_models / "micro-qwen35moe.gguf"), str(clean)]) == 0
    to_node = []
    for i, (label, write) in enumerate(store_corpus(clean, random.Random(47), 120, 60)):
        folder = tmp_path / f"s{i}"
        write(folder)
        tally.inputs += 1
        rc = tally.run(label, ["verify", folder], json_out=False)
        try:
            read_store_manifest(folder)
            if rc == 1 and len(to_node) < 2 and ".bin" in label:
                to_node.append((label, folder))
                continue
        except StoreDamaged:
            tally.run(label, ["run", "--store", folder, "--ids", "1,2", "--n", "2"])
        shutil.rmtree(folder)
    if shutil.which("node"):
        for label, folder in to_node:
            subprocess_check(tally, label, ["run", "--store", folder, "--ids", "1,2", "--n", "2", "--budget", "min"])
    assert tally.clean_errors >= 150
