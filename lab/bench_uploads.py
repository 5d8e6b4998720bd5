"""`diskformer bench-uploads`: expert-record upload throughput on this machine's WebGPU (Pyodide + Dawn in Node),
staging ring against writeBuffer. Prints JSON and one line per method."""
import argparse
import json
import sys

from diskformer.node_engine import NodeEngineError, run_in_node

from . import ENGINE_SIDE


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="diskformer bench-uploads", description=__doc__)
    ap.add_argument("--record-bytes", type=int, default=3_342_336, help="bytes per upload (a qwen35moe expert record)")
    ap.add_argument("--count", type=int, default=64, help="uploads per timed run (best of 3)")
    ap.add_argument("--ring", type=int, default=4, help="staging buffers in the ring")
    a = ap.parse_args(argv)
    try:
        res = run_in_node("lab.engine_bench.uploads:run",
                          {"record_bytes": a.record_bytes, "count": a.count, "ring": a.ring}, packages=[ENGINE_SIDE])
    except NodeEngineError as e:
        print(f"diskformer bench-uploads: {e}", file=sys.stderr)
        return 1
    print(json.dumps(res))
    for name, r in res["results"].items():
        print(f"{name:>13}: {r['GBps']:8.3f} GB/s  ({r['records_per_s']} records/s of {res['record_bytes']} B)")
    if not all(r["bytes_landed"] for r in res["results"].values()):
        print("diskformer bench-uploads: uploaded bytes did not land in their slots", file=sys.stderr)
        return 1
    return 0
