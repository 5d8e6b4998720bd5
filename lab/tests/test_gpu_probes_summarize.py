"""lab/gpu_probes/summarize.py: the device calls' archives (ab.sh's ab.tgz, diagnose.sh's diagnose.tgz) as Markdown
tables, from bench outputs of the form `diskformer bench` prints (text, then the whole result as one JSON line)."""
import json
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _result(tok_s, costs=True):
    raw = {"decode": {"ms_median": 0.89, "launch_ms_median": 0.31, "wait_ms_median": 0.58},
           "replay_rate": {"total_us_per_token": 890.0, "cpu_us_per_token": 730.0},
           "profile": {"available": True, "kinds": [{"kind": "ffn_moe_out", "dispatches": 8, "us": 169.1}]}}
    if costs:
        raw["step_passes"] = {"available": True, "span_us_median": 802.5, "busy_us_median": 790.0,
                              "gap_us_median": 12.25}
        raw["kernel_costs"] = {"available": True, "full_us": 880.0, "floor_us": 120.0,
                               "kinds": [{"kind": "ffn_moe_out", "dispatches": 8, "us": 121.5},
                                         {"kind": "result_output", "dispatches": 1, "us": 130.2}]}
    return {"raw": raw, "derived": {"decode_tok_s": tok_s, "prefill_tok_s": 26000.0, "measured_over_bound": 0.26,
                                    "gpu_busy_ms_per_token": 1.16}}


def _write(folder: Path, name: str, text: str):
    (folder / name).write_text(text)


def test_tables_from_the_archives(tmp_path):
    ab = tmp_path / "ab"
    ab.mkdir()
    _write(ab, "prof_new.txt", "decode tok/s ...\n" + json.dumps(_result(1100.0)) + "\n")
    _write(ab, "ab1_new.txt", "x\n" + json.dumps(_result(1050.0)) + "\n")
    _write(ab, "prof_m.txt", "x\n" + json.dumps(_result(1000.0, costs=False)) + "\n")
    _write(ab, "gen.log", "generated\n")
    archive = tmp_path / "ab.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for p in sorted(ab.iterdir()):
            tar.add(p, arcname=p.name)
    diag = tmp_path / "diag"
    diag.mkdir()
    _write(diag, "grid_barrier.jsonl", json.dumps({"workgroups": 132, "mode": "plain", "us_per_barrier": 0.9}) + "\n")
    res = subprocess.run([sys.executable, "lab/gpu_probes/summarize.py", str(archive), str(diag)], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # every run of every state, profiled first
    assert "| new | profiled | 1,100.0 (0.890) | 0.310 / 0.580 | 890.0 (730.0) |" in out
    assert "| new | ab1 | 1,050.0" in out and "| m | profiled | 1,000.0" in out
    # the profiled runs side by side; a state without in-pass costs leaves them blank
    assert "| per token | new | m |" in out or "| per token | m | new |" in out
    assert "ffn_moe_out: in-pass / timestamps µs" in out and "121.5 / 169.1" in out and " / 169.1 |" in out
    assert "result_output: in-pass / timestamps µs" in out
    # the queued steps' pass and the gap after it (a state run before the bench measured them: blank)
    assert "| queued steps: a token's span (busy) / gap to the next, µs |" in out and "802.5 (790.0) / 12.2" in out
    assert " () /  |" in out
    assert "**grid_barrier**" in out and "| 132 | plain | 0.9 |" in out


def test_refuses_what_is_not_there(tmp_path):
    res = subprocess.run([sys.executable, "lab/gpu_probes/summarize.py", str(tmp_path / "none.tgz")], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 1 and "no such file" in res.stderr
    res = subprocess.run([sys.executable, "lab/gpu_probes/summarize.py"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2
