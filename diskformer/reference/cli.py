"""`diskformer reference MODEL.gguf --ids IDS ...`: greedy ids and per-step top-k log-probabilities as JSON.

Step i scores the token after the prompt plus the first i forced (or greedy) ids: with --teacher-force of k ids
there are k + 1 steps; with --n N (and no --teacher-force) N greedy steps.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from ..commands.ids_args import add_step_arguments, context_error, step_arguments_error


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="diskformer reference", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a qwen3moe, qwen35moe or gemma4 GGUF file")
    add_step_arguments(ap)
    ap.add_argument("--f32", action="store_true", help="compute in float32 (default float64)")
    ap.add_argument("--q8-act", action="store_true",
                    help="emulate ggml's quantisation of the activations entering quantised matrices "
                         "(Q8_0 for Q8_0 and Q4_0 weights, Q8_K for Q6_K)")
    ap.add_argument("--kv-f16", action="store_true", help="round K and V to float16 in the cache")
    ap.add_argument("--gelu-table", action="store_true",
                    help="gemma4: GELU through ggml-cpu's fp16 table, as llama.cpp's CPU backend computes it "
                         "(default: exactly)")
    return ap


def top_logprobs(logits, k: int) -> list:
    """[[id, logprob], ...] best first, ties to the lower id, logprob over the full vocabulary in float64."""
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    lp = x - (m + np.log(np.exp(x - m).sum()))
    order = np.argsort(-lp, kind="stable")[:k]
    return [[int(i), float(lp[i])] for i in order]


def main(argv) -> int:
    args = build_parser().parse_args(argv)
    usage_error = step_arguments_error(args)
    if usage_error:
        print(f"diskformer reference: {usage_error}", file=sys.stderr)
        return 2

    from .model import ReferenceModel
    from .options import Options

    options = Options(dtype=np.float32 if args.f32 else np.float64, q8_activations=args.q8_act,
                      kv_f16=args.kv_f16, gelu_fp16_table=args.gelu_table)
    try:
        with np.errstate(all="ignore"):  # NaN or inf weights: the logits are checked (and refused) below
            model = ReferenceModel(args.model, options)
    except (FileNotFoundError, KeyError, ValueError, NotImplementedError) as exc:
        print(f"diskformer reference: {exc}", file=sys.stderr)
        return 1
    trained = model.weights.get(f"{model.config.arch}.context_length", 0)
    too_long = context_error(args, trained, "the model's context")
    if too_long:
        print(f"diskformer reference: {too_long}", file=sys.stderr)
        return 1
    try:
        with np.errstate(all="ignore"):
            if args.teacher_force is not None:
                rows = model.teacher_forced(args.ids, args.teacher_force)
                greedy = [int(np.argmax(r)) for r in rows]
            else:
                greedy, rows = model.greedy(args.ids, args.n or 1)
    except ValueError as exc:
        print(f"diskformer reference: {exc}", file=sys.stderr)
        return 1
    finite = np.isfinite(rows).all(axis=-1)
    if not finite.all():
        step = int(np.argmin(finite))
        print(f"diskformer reference: step {step}'s logits are not finite numbers (NaN or infinity): the model's "
              "weights or hyper-parameters are broken", file=sys.stderr)
        return 1
    print(json.dumps({"greedy_ids": greedy, "steps": [{"top": top_logprobs(r, args.top)} for r in rows]},
                     allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
