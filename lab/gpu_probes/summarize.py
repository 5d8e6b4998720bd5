"""The device calls' archives as tables: `python lab/gpu_probes/summarize.py ab.tgz [diagnose.tgz ...]` (or the folders
they were unpacked into) prints them as Markdown tables (for a results file and docs/performance.md).

ab.tgz (ab.sh): per engine state, every run's decode tok/s (median step ms), the step's launch / wait medians, the
back-to-back replays (µs per token, of which the encode + submit loop), prefill tok/s and measured / bound; then the
profiled runs side by side: GPU busy, the in-pass costs' full list and floor, and each kernel kind's in-pass µs and
timestamp-profile µs per token. diagnose.tgz (diagnose.sh): each tool's JSON lines as one table per tool.
Needs nothing beyond the standard library (it runs on the GPU machine too).
"""
import json
import re
import sys
import tarfile
from pathlib import Path


def read_members(path: Path) -> dict:
    """{file name: text} of an archive or a folder."""
    if path.is_dir():
        return {p.name: p.read_text() for p in sorted(path.iterdir()) if p.is_file()}
    with tarfile.open(path) as tar:
        return {Path(m.name).name: tar.extractfile(m).read().decode()
                for m in tar.getmembers() if m.isfile()}


def last_json(text: str):
    """The last line of a bench output that is a JSON object (the whole result), or None."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _f(v, fmt=",.1f"):
    return "" if v is None else format(v, fmt)


def bench_runs(files: dict) -> dict:
    """{state: [(run name, result)]} from ab.sh's prof_STATE.txt / abR_STATE.txt."""
    runs = {}
    for name, text in files.items():
        m = re.fullmatch(r"(prof|ab\d+)_(.+)\.txt", name)
        res = last_json(text) if m else None
        if res is not None:
            runs.setdefault(m.group(2), []).append(("profiled" if m.group(1) == "prof" else m.group(1), res))
    for state in runs:
        runs[state].sort(key=lambda r: (r[0] != "profiled", r[0]))
    return runs


def ab_tables(files: dict) -> str:
    runs = bench_runs(files)
    if not runs:
        return ""
    out = ["| state | run | decode tok/s (median ms) | launch / wait ms | replays µs/token (loop) | prefill tok/s | "
           "measured / bound |", "|---|---|---|---|---|---|---|"]
    for state, rs in runs.items():
        for run, res in rs:
            raw, d = res["raw"], res["derived"]
            dec, rate = raw["decode"], raw.get("replay_rate") or {}
            out.append(f"| {state} | {run} | {_f(d['decode_tok_s'])} ({_f(dec.get('ms_median'), '.3f')}) | "
                       f"{_f(dec.get('launch_ms_median'), '.3f')} / {_f(dec.get('wait_ms_median'), '.3f')} | "
                       f"{_f(rate.get('total_us_per_token'))} ({_f(rate.get('cpu_us_per_token'))}) | "
                       f"{_f(d['prefill_tok_s'])} | {_f(d['measured_over_bound'], '.3f')} |")
    prof = {s: rs[0][1] for s, rs in runs.items() if rs and rs[0][0] == "profiled"}
    if prof:
        states = list(prof)
        out += ["", "| per token | " + " | ".join(states) + " |", "|---|" + "---:|" * len(states)]
        row = lambda label, vals: out.append(f"| {label} | " + " | ".join(vals) + " |")  # noqa: E731
        row("GPU busy, ms (timestamps)", [_f(prof[s]["derived"].get("gpu_busy_ms_per_token"), ".3f") for s in states])
        costs = {s: prof[s]["raw"].get("kernel_costs") or {} for s in states}
        row("in-pass: the list, µs", [_f(costs[s].get("full_us")) for s in states])
        row("in-pass: launches + barriers, µs", [_f(costs[s].get("floor_us")) for s in states])
        passes = {s: prof[s]["raw"].get("step_passes") or {} for s in states}
        row("queued steps: a token's span (busy) / gap to the next, µs",
            [f"{_f(passes[s].get('span_us_median'))} ({_f(passes[s].get('busy_us_median'))}) / "
             f"{_f(passes[s].get('gap_us_median'))}" for s in states])
        kinds = []
        for s in states:
            for k in (costs[s].get("kinds") or []) + ((prof[s]["raw"].get("profile") or {}).get("kinds") or []):
                if k["kind"] not in kinds:
                    kinds.append(k["kind"])
        for kind in kinds:
            vals = []
            for s in states:
                cost = next((k["us"] for k in costs[s].get("kinds") or [] if k["kind"] == kind), None)
                ts = next((k["us"] for k in (prof[s]["raw"].get("profile") or {}).get("kinds") or []
                           if k["kind"] == kind), None)
                vals.append(f"{_f(cost)} / {_f(ts)}")
            row(f"{kind}: in-pass / timestamps µs", vals)
    return "\n".join(out)


def jsonl_table(name: str, text: str) -> str:
    """A tool's JSON lines as tables: one per set of keys (a tool prints rows of several kinds), in first-seen order."""
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if not rows:
        return ""
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r), []).append(r)
    cell = lambda v: json.dumps(v) if isinstance(v, (dict, list)) else str(v)  # noqa: E731
    out = [f"**{name}**"]
    for keys, rs in groups.items():
        out += ["", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        out += ["| " + " | ".join(cell(r[k]) for k in keys) + " |" for r in rs]
    return "\n".join(out)


def summarize(paths) -> str:
    parts = []
    for path in paths:
        files = read_members(Path(path))
        parts.append(f"### {Path(path).name}")
        ab = ab_tables(files)
        if ab:
            parts.append(ab)
        for name, text in files.items():
            if name.endswith(".jsonl"):
                table = jsonl_table(name[:-len(".jsonl")], text)
                if table:
                    parts.append(table)
    return "\n\n".join(parts) + "\n"


def main(argv) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    missing = [p for p in argv if not Path(p).exists()]
    if missing:
        print(f"summarize: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 1
    sys.stdout.write(summarize(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
