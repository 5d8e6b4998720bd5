"""`diskformer bench-tab-vs-node [bench options] --out-dir DIR`: the Node bench and the tab bench (`bench --browser
chromium`) on the same file in one command, on the same machine, then each figure as tab | Node | tab/Node.

Both run the resident case on the same engine: the store engine with every expert in its pool (a tab cannot load
a GGUF larger than wasm memory, so Node runs `--resident-from-store` here), and the same pool fractions. Options
are `diskformer bench`'s (--model, --budgets, --prompt, --decode, ...; --browser is implied for the tab run, its
options --chromium, --flag-sets, --want, --tab-profile, --tab-port go to it). Writes DIR/node.json, DIR/tab.json
(each the bench's whole JSON) and DIR/compare.json (the rows below); prints both tables, then the comparison.
`--runs node` / `--runs tab` runs one side only (two calls where one call's time is short): the comparison comes
once both JSONs are in DIR.

Per-dispatch and per-sync costs come from the resident case: the decode's token list replayed back to back
without readback (replay_rate) gives µs per dispatch (wall, and the CPU's encode + submit); a decoded token's time
minus that replay, over its syncs, is what each sync (readback and its await) adds."""
import argparse
import json
import sys
from pathlib import Path

from .. import bench


def _get(d, *path):
    for key in path:
        if not isinstance(d, dict) or d.get(key) is None:
            return None
        d = d[key]
    return d


def _per_dispatch(result, key):
    raw = result["raw"]
    us, n = _get(raw, "replay_rate", key), raw.get("dispatches_per_token")
    return us / n if us is not None and n else None


def _per_sync_us(result):
    raw, d = result["raw"], result["derived"]
    replay, syncs = _get(raw, "replay_rate", "total_us_per_token"), _get(d, "syncs_per_token", "decode")
    if replay is None or not syncs or d.get("decode_ms_per_token") is None:
        return None
    return (d["decode_ms_per_token"] * 1e3 - replay) / syncs


def figures(result: dict) -> dict:
    """{label: value} of one bench result (bench's JSON): the resident case, then each pool fraction."""
    d, raw = result["derived"], result["raw"]
    out = {
        "decode tok/s": d.get("decode_tok_s"),
        "prefill tok/s": d.get("prefill_tok_s"),
        "decode ms/token": d.get("decode_ms_per_token"),
        "syncs/token (decode)": _get(d, "syncs_per_token", "decode"),
        "syncs/token (prefill)": _get(d, "syncs_per_token", "prefill"),
        "ffi calls/token (decode)": _get(d, "ffi_calls_per_token", "decode"),
        "us/dispatch (replayed, no readback)": _per_dispatch(result, "total_us_per_token"),
        "CPU us/dispatch (encode + submit)": _per_dispatch(result, "cpu_us_per_token"),
        "us/sync (token minus replay)": _per_sync_us(result),
        "GPU busy ms/token": d.get("gpu_busy_ms_per_token"),
        "overhead us/dispatch (profiled)": d.get("overhead_us_per_dispatch"),
        "streaming read GB/s": d.get("stream_GBps"),
        "load s (resident)": raw["load_ms"] / 1e3 if raw.get("load_ms") is not None else None,
    }
    for label, b in d.get("budgets", {}).items():
        stages = b.get("stages") or {}
        out.update({
            f"{label}: decode tok/s": b.get("decode_tok_s"),
            f"{label}: prefill tok/s": b.get("prefill_tok_s"),
            f"{label}: syncs/token (decode)": _get(b, "syncs_per_token", "decode"),
            f"{label}: hit rate": b.get("hit_rate"),
            f"{label}: store read MB/s (serial)": b.get("read_MBps"),
            f"{label}: upload GB/s (serial ring)": b.get("upload_GBps"),
            f"{label}: read limit GB/s": _get(stages, "read", "limit_GBps"),
            f"{label}: upload limit GB/s": _get(stages, "upload", "limit_GBps"),
            f"{label}: waiting for loads ms/token": b.get("stall_ms_per_token"),
        })
    return out


def compare(tab: dict, node: dict) -> list:
    """[{figure, tab, node, ratio}] for every figure either run has."""
    ft, fn = figures(tab), figures(node)
    rows = []
    for key in dict.fromkeys([*ft, *fn]):
        t, n = ft.get(key), fn.get(key)
        if t is None and n is None:
            continue
        rows.append({"figure": key, "tab": t, "node": n, "ratio": t / n if t is not None and n else None})
    return rows


def _fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def render(rows: list, tab: dict, node: dict) -> str:
    b, dev = tab["raw"]["browser"], node["raw"]["device"]
    lines = [f"tab:  {b['version']} (flag set {b['flag_set']!r}), adapter "
             f"{tab['raw']['device'].get('description')}",
             f"Node: Dawn, adapter {dev.get('description')}; the same file, the same machine, one after the other",
             "", "| figure | tab | Node | tab/Node |", "|---|---:|---:|---:|"]
    lines += [f"| {r['figure']} | {_fmt(r['tab'])} | {_fmt(r['node'])} | "
              f"{'-' if r['ratio'] is None else format(r['ratio'], '.2f')} |" for r in rows]
    return "\n".join(lines)


TAB_ONLY = ("--chromium", "--flag-sets", "--want", "--tab-profile", "--tab-port")


def node_options(argv: list) -> list:
    """The bench options without those of the tab alone (each with its value: "--want X" or "--want=X")."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in TAB_ONLY:
            skip = True
        elif a.split("=")[0] not in TAB_ONLY:
            out.append(a)
    return out


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="diskformer bench-tab-vs-node", add_help=False)
    ap.add_argument("--out-dir", type=Path, required=True, help="folder for node.json, tab.json and compare.json")
    ap.add_argument("--runs", default="node,tab",
                    help="which benches to run now (default node,tab; one per call where a call's time is short: "
                         "the comparison is printed once both JSONs are in --out-dir)")
    ap.add_argument("-h", "--help", action="store_true")
    own, rest = ap.parse_known_args(argv)
    if own.help:
        print(__doc__)
        return 0
    if any(a in ("--browser", "--json-out") or a.startswith(("--browser=", "--json-out=")) for a in rest):
        print("diskformer bench-tab-vs-node: --browser and --json-out are set here (see --out-dir)", file=sys.stderr)
        return 2
    node_argv = node_options(rest)
    runs = [r for r in own.runs.split(",") if r]
    if not runs or set(runs) - {"node", "tab"}:
        print("diskformer bench-tab-vs-node: --runs takes node, tab or node,tab", file=sys.stderr)
        return 2
    own.out_dir.mkdir(parents=True, exist_ok=True)
    node_json, tab_json = own.out_dir / "node.json", own.out_dir / "tab.json"
    if "node" in runs:
        print("== Node + Dawn ==", flush=True)
        rc = bench.main(node_argv + ["--resident-from-store", "--json-out", str(node_json)])
        if rc:
            return rc
    if "tab" in runs:
        print("\n== Chromium tab ==", flush=True)
        rc = bench.main(rest + ["--browser", "chromium", "--json-out", str(tab_json)])
        if rc:
            return rc
    if not (node_json.is_file() and tab_json.is_file()):
        print(f"\nthe comparison waits for {'tab.json' if node_json.is_file() else 'node.json'} in {own.out_dir}")
        return 0
    node, tab = json.loads(node_json.read_text()), json.loads(tab_json.read_text())
    rows = compare(tab, node)
    (own.out_dir / "compare.json").write_text(json.dumps({
        "rows": rows, "chromium_version": tab["raw"]["browser"]["version"], "flags": tab["raw"]["browser"]["flags"],
        "tab_adapter": tab["raw"]["browser"]["adapter"], "node_device": node["raw"]["device"],
        "files": {"node": node_json.name, "tab": tab_json.name}}, indent=1) + "\n")
    print("\n" + render(rows, tab, node))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
