"""`diskformer run MODEL.gguf --ids IDS ...`: the WebGPU engine headless (Pyodide + Dawn in Node).
`diskformer run --store DIR [--budget BYTES] --ids IDS ...` runs from a model store with the experts streamed.

Prints the JSON of `diskformer reference` ({"greedy_ids": [...], "steps": [{"top": [[id, logprob], ...]}]}) plus
"stats" (load time, per-token time, GPU bytes, the adapter). Step i scores the token after the prompt plus the
first i fed ids: with --teacher-force of k ids there are k + 1 steps; with --n N, N greedy steps.
"""
import argparse
import json
import re
import sys
from pathlib import Path

from .commands.ids_args import add_step_arguments, context_error, step_arguments_error
from .node_engine import NodeEngineError, run_in_node

# the CPU expert tier's worker pool, loaded by Node from the repository's web folder
CPU_TIER_POOL = Path(__file__).resolve().parents[1] / "web" / "cpu_tier" / "pool.js"

ENTRY = "py_engine.engine.node_entry:run"


def parse_budget(text: str):
    """Bytes with an optional binary suffix (512M, 2G), or "min"."""
    t = text.strip().lower()
    if t == "min":
        return "min"
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    try:
        n = int(t[:-1] if mult > 1 else t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (use 800000000, 512M, 2G or min)") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"the budget must be positive: {text!r}")
    return n


class ModelUnreadable(Exception):
    """The model file or store cannot be used; the message says why and what to do."""


def model_context(args) -> int:
    """The model's trained context length (0 when it states none), read before Node starts so a run that cannot
    fit is refused in a second, not after minutes of decoding. Checks the store or file on the way."""
    if args.store is not None:
        from py_engine.store.check import StoreDamaged, read_store_manifest

        try:
            manifest = read_store_manifest(args.store)
        except StoreDamaged as exc:
            raise ModelUnreadable(str(exc)) from None
        meta, arch = manifest["config"]["metadata"], manifest["config"]["architecture"]
    else:
        from py_engine.gguf import GGUFError, check_supported, read_gguf_file

        if not Path(args.model).is_file():
            raise ModelUnreadable(f"no such file: {args.model}")
        try:
            header = read_gguf_file(args.model)
            check_supported(header)
        except (OSError, GGUFError) as exc:
            raise ModelUnreadable(f"{args.model}: {exc}") from None
        meta, arch = header.metadata, header.architecture
    value = meta.get(f"{arch}.context_length", 0)
    return value if type(value) is int and value > 0 else 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="diskformer run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=None, help="a qwen3moe or qwen35moe GGUF file (Q8_0 or F32 "
                    "matrices); or give --store")
    ap.add_argument("--store", type=Path, default=None, metavar="DIR",
                    help="run from a model store folder (made by the ingest) with the experts streamed from disk")
    ap.add_argument("--budget", type=parse_budget, default=None, metavar="BYTES",
                    help="GPU budget with --store: bytes (suffix K/M/G allowed) or 'min' for the smallest allowed; "
                    "default: every expert resident")
    ap.add_argument("--no-gpu-routing", action="store_true",
                    help="with --store: route on the CPU, layer by layer (read each MoE layer's expert ids back, page "
                    "them in, submit the layer), even with every expert resident; the same logits, one sync per "
                    "layer per token")
    add_step_arguments(ap)
    ap.add_argument("--cpu-tier", type=int, default=0, metavar="N",
                    help="with --store: N CPU workers compute the misses the cost model places on the CPU instead "
                         "of uploading them (per-layer routing; default 0: off)")
    ap.add_argument("--embedding-rows", type=int, default=None, metavar="S",
                    help="with --store: the token table stays on disk and its rows come through a GPU cache of S "
                         "rows (0: the table resident; default: the budget decides)")
    ap.add_argument("--kv", choices=("f16", "f32"), default="f16", help="KV cache precision (default f16)")
    ap.add_argument("--n-ctx", type=int, default=2048, help="KV cache positions (default 2048, capped by the model)")
    ap.add_argument("--logits-out", type=Path, default=None, help="write every step's raw f32 logits to this file")
    ap.add_argument("--prefill-chunk", type=int, default=None, metavar="T",
                    help="prompt tokens per batched prefill chunk (default: the engine's, 256 on a GPU and 64 on a "
                         "CPU adapter; 1 = token by token)")
    ap.add_argument("--verbose", action="store_true", help="echo the engine's log (stderr)")
    return ap


def engine_args(args) -> tuple[dict, list]:
    """The entry's argument dict and the host folders Node must mount for it."""
    run = {"ids": args.ids, "teacher_force": args.teacher_force, "n": args.n, "top": args.top, "kv": args.kv,
           "n_ctx": args.n_ctx, "prefill_chunk": args.prefill_chunk}
    if args.store is not None:
        store = args.store.resolve()
        run.update(store=str(store), budget=args.budget)
        if args.no_gpu_routing:
            run["routing"] = "per_layer"
        if args.cpu_tier:
            run.update(cpu_tier=args.cpu_tier, cpu_tier_url=CPU_TIER_POOL.as_uri())
        if args.embedding_rows is not None:
            run["embedding_rows"] = args.embedding_rows
        mounts = [store]
    else:
        model = Path(args.model).resolve()
        run["model"] = str(model)
        mounts = [model.parent]
    if args.logits_out is not None:
        out = args.logits_out.resolve()
        run["logits_out"] = str(out)
        mounts.append(out.parent)
    return run, sorted(set(mounts))


def _user_line(line: str) -> str:
    """The engine's error without the runner's prefix and the exception's module path."""
    return re.sub(r"^engine run failed \(exit \d+\): (?:[A-Za-z_][\w.]*: )?", "", line)


def main(argv) -> int:
    args = build_parser().parse_args(argv)
    usage_error = step_arguments_error(args)
    if usage_error:
        print(f"diskformer run: {usage_error}", file=sys.stderr)
        return 2
    if args.prefill_chunk is not None and args.prefill_chunk < 1:
        print("diskformer run: --prefill-chunk must be >= 1", file=sys.stderr)
        return 2
    if (args.model is None) == (args.store is None):
        print("diskformer run: give either a GGUF file or --store DIR", file=sys.stderr)
        return 2
    if args.budget is not None and args.store is None:
        print("diskformer run: --budget applies to --store runs (experts streamed into a pool)", file=sys.stderr)
        return 2
    if args.cpu_tier and args.store is None:
        print("diskformer run: --cpu-tier applies to --store runs (a GGUF file keeps every expert on the GPU)",
              file=sys.stderr)
        return 2
    if args.cpu_tier < 0:
        print(f"diskformer run: --cpu-tier takes a number of CPU workers (0: off), not {args.cpu_tier}",
              file=sys.stderr)
        return 2
    if args.embedding_rows is not None and (args.store is None or args.embedding_rows < 0):
        print("diskformer run: --embedding-rows takes the row cache's size (0: the table resident) and applies to "
              "--store runs", file=sys.stderr)
        return 2
    if args.no_gpu_routing and args.store is None:
        print("diskformer run: --no-gpu-routing applies to --store runs (a GGUF file runs with every expert "
              "resident and routes on the GPU)", file=sys.stderr)
        return 2
    if args.n_ctx < 1:
        print(f"diskformer run: --n-ctx must be >= 1, not {args.n_ctx}", file=sys.stderr)
        return 2
    try:
        trained = model_context(args)
    except ModelUnreadable as exc:
        print(f"diskformer run: {exc}", file=sys.stderr)
        return 1
    n_ctx = min(args.n_ctx, trained) if trained else args.n_ctx
    what = "--n-ctx" if n_ctx == args.n_ctx else "the model's context"
    too_long = context_error(args, n_ctx, what)
    if too_long:
        print(f"diskformer run: {too_long}", file=sys.stderr)
        return 1
    run, mounts = engine_args(args)
    try:
        result = run_in_node(ENTRY, run, mounts=mounts, echo_stderr=args.verbose)
    except NodeEngineError as exc:
        # the first line names the error; the Python traceback follows (shown with --verbose)
        msg = str(exc) if args.verbose else _user_line(str(exc).splitlines()[0])
        if args.store is not None and "is damaged" in msg:
            msg += f" (`diskformer ingest MODEL.gguf {args.store}` repairs it)"
        print(f"diskformer run: {msg}", file=sys.stderr)
        return 1
    try:
        text = json.dumps(result, allow_nan=False)
    except ValueError:
        print("diskformer run: the engine's logits are not finite numbers (NaN or infinity): the model's weights or "
              "hyper-parameters are broken", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
