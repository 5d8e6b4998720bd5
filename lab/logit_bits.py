"""Whether two engine states give the same logits, bit for bit: the check behind "the same bits" in
docs/results/ when a kernel changes its form but not its arithmetic.

    python lab/logit_bits.py dump OUT [--models micro-qwen35moe,...] [--act q8|f32] [--kv f16|f32]
    python lab/logit_bits.py compare A B

`dump` runs the engine as shipped (Pyodide + Dawn in Node) teacher-forced along llama.cpp's greedy ids on every
prompt of each fixture model (fixtures/models, made by `bash scripts/test.sh` or ../shared/fixtures/make_models.py)
and writes every step's raw f32 logits to OUT/<model>.<kv>.<prompt>.f32; `compare` reports the files of A that B
lacks or holds other bits in (exit 1 if any). Dump at one commit, check out the other, dump again, compare.
Bit identity holds per device: the driver may round another code shape differently (route_variants.mjs's written-out loops on the H200).
"""
import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODELS = ["micro-qwen3moe", "tiny-qwen3moe", "qwen3vocab-qwen3moe", "micro-qwen35moe", "micro-gqa-qwen35moe",
          "tiny-qwen35moe", "wide-qwen35moe", "qwen3vocab-qwen35moe", "micro-qwen35moe-f32", "micro-qwen3moe-f32"]


def dump(out: Path, models, act: str, kv: str, models_dir: Path) -> int:
    sys.path.insert(0, str(REPO))
    from diskformer.node_engine import run_in_node
    from diskformer.reference import protocol

    missing = [m for m in models if not (models_dir / f"{m}.gguf").is_file()]
    if missing:
        raise SystemExit(f"no {', '.join(m + '.gguf' for m in missing)} in {models_dir}: name fixture models "
                         f"({', '.join(MODELS)}) and make them first "
                         f"(python ../shared/fixtures/make_models.py fixtures/models)")
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for stem in models:
        runs = [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 1,
                 "logits_out": str(out / f"{stem}.{kv}.{p['index']}.f32")}
                for p in protocol.load_refs(stem)["prompts"]]
        jobs.append({"model": str(models_dir / f"{stem}.gguf"), "kv": kv, "act": act, "runs": runs})
    run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[models_dir, out], timeout=1800)
    n = sum(len(j["runs"]) for j in jobs)
    print(f"{n} logit files of {len(models)} models in {out}")
    return n


def compare(a: Path, b: Path) -> list:
    """The names of A's logit files that B lacks or that differ in any bit, with the largest difference."""
    bad = []
    names = sorted(p.name for p in a.glob("*.f32"))
    if not names:
        raise SystemExit(f"no logit files in {a}")
    for name in names:
        x = np.fromfile(a / name, "<u4")
        if not (b / name).is_file():
            bad.append(f"{name}: missing in {b}")
            continue
        y = np.fromfile(b / name, "<u4")
        if x.shape != y.shape:
            bad.append(f"{name}: {x.size} values against {y.size}")
        elif (x != y).any():
            diff = np.abs(x.view("<f4").astype(np.float64) - y.view("<f4").astype(np.float64))
            bad.append(f"{name}: {int((x != y).sum())} values differ, by up to {np.nanmax(diff):.3g}")
    print(f"{len(names)} files compared, {len(bad)} differ")
    for line in bad:
        print("  " + line)
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="teacher-forced logits of fixture models into a folder")
    d.add_argument("out", type=Path)
    d.add_argument("--models", default=",".join(MODELS), help="comma-separated fixture model names")
    d.add_argument("--act", choices=("q8", "f32"), default="q8", help="the engine's activation mode")
    d.add_argument("--kv", choices=("f16", "f32"), default="f16", help="the KV cache format")
    d.add_argument("--models-dir", type=Path, default=REPO / "fixtures" / "models")
    c = sub.add_parser("compare", help="bit for bit, every logit file of A against B")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        dump(args.out, [m for m in args.models.split(",") if m], args.act, args.kv, args.models_dir)
        return 0
    return 1 if compare(args.a, args.b) else 0


if __name__ == "__main__":
    sys.exit(main())
