#!/usr/bin/env python3
"""make_tiny.py's file, byte for byte, with its tensors generated in parallel processes.

make_tiny.py seeds each tensor from (seed, name) alone, so tensors can be made in any order; it makes them one
after the other on one core (~270 s for the 8-layer real-dimension file), which is most of a fresh GPU machine's
set-up. This runs make_tiny.py's own main() with its tensor generator served by a process pool (fork: the workers
inherit the specs, whose generators are closures that cannot be pickled), results taken in the file's order.

  python lab/gpu_probes/make_tiny_parallel.py MAKE_TINY_PY [--jobs N] -- ARGUMENTS OF make_tiny.py
  e.g. python lab/gpu_probes/make_tiny_parallel.py ../shared/tools/make_tiny.py -- --arch qwen35moe --preset real \\
         --layers 8 --out real8.gguf
"""
from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import sys

# set before the pool forks; the workers read them
_specs: list = []
_gen_tensor = None  # make_tiny's own generator, kept before main() is given the pool's


def _load(path: str):
    spec = importlib.util.spec_from_file_location("make_tiny", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file to load")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tensor_bytes(i: int, seed: int):
    import numpy as np
    parts = list(_gen_tensor(_specs[i], seed))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def main(argv=None) -> int:
    global _gen_tensor
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("make_tiny", help="path of make_tiny.py")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        ap.error("give make_tiny.py's arguments after --")
    cut = argv.index("--")
    a, rest = ap.parse_args(argv[:cut]), argv[cut + 1:]
    if not os.path.isfile(a.make_tiny):
        raise SystemExit(f"{a.make_tiny}: no such file (give the path of make_tiny.py)")
    mod = _load(a.make_tiny)
    _gen_tensor = mod.gen_tensor
    pools, pending = [], {}  # the pool, once the specs exist; spec index -> its result

    def specs_then_pool(build_specs, args, n_vocab):
        specs = build_specs(args, n_vocab)
        _specs[:] = specs
        pools.append(multiprocessing.get_context("fork").Pool(max(1, a.jobs)))
        # largest first keeps every worker busy to the end; the file still takes them in its own order
        for i in sorted(range(len(specs)), key=lambda i: -specs[i].nbytes()):
            pending[i] = pools[0].apply_async(_tensor_bytes, (i, args.seed))
        return specs

    def gen_from_pool(spec, seed):
        i = len(_specs) - len(pending)  # make_tiny.py takes the tensors in the specs' order
        assert _specs[i] is spec, "make_tiny.py asked for tensors out of order"
        data = pending.pop(i).get()
        n, done = len(_specs), i + 1
        if sys.stderr.isatty():
            print(f"\r{done}/{n} tensors", end="\n" if done == n else "", file=sys.stderr, flush=True)
        elif done == n or done * 10 // n != i * 10 // n:  # a log file: a line each tenth
            print(f"{done}/{n} tensors", file=sys.stderr, flush=True)
        yield data

    # each architecture's spec builder (build_specs, build_specs_gemma4, ...) hands its list to the pool
    for name in [n for n in dir(mod) if n.startswith("build_specs")]:
        mod.__dict__[name] = (lambda build: lambda args, n_vocab: specs_then_pool(build, args, n_vocab))(
            getattr(mod, name))
    mod.gen_tensor = gen_from_pool
    try:
        mod.main(rest)
    finally:
        for pool in pools:
            pool.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
