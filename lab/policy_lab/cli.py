"""`diskformer policy-lab`: replay a synthetic routing trace through the streamer's cache policies and print a table."""
import argparse
import time

from .simulate import simulate
from .traces import ARCHS, TraceParams, default_params, generate, measure


def _floats(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _policies(text):
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in ("lru", "hot")]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"policies are lru and hot, got {text!r}")
    return values


def parser():
    p = argparse.ArgumentParser(prog="diskformer policy-lab", description=__doc__)
    p.add_argument("--pool", type=_floats, default=[0.05, 0.1, 0.2, 0.3, 0.4],
                   help="pool sizes as fractions of all experts (default 0.05,0.1,0.2,0.3,0.4)")
    p.add_argument("--policy", type=_policies, default=["lru", "hot"], help="eviction policies (default lru,hot)")
    p.add_argument("--prefetch-accuracy", type=_floats, default=[0.0, 0.5, 0.9],
                   help="look-ahead guess accuracies; 0 = no prefetch (default 0,0.5,0.9)")
    p.add_argument("--tokens", type=int, default=1000, help="trace length in tokens (default 1000)")
    p.add_argument("--warmup", type=int, default=None, help="tokens before counting (default tokens/5)")
    p.add_argument("--arch", choices=sorted(ARCHS), default="qwen3moe", help="model shape (default qwen3moe)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--half-life", type=float, default=4.0, help="hot policy half-life in tokens (default 4)")
    p.add_argument("--max-inflight", type=int, default=16, help="prefetch reads in flight (default 16)")
    p.add_argument("--p-repeat", type=float, default=None, help="trace: prob a pick reuses t-1 (default tuned)")
    p.add_argument("--p-recent", type=float, default=None, help="trace: prob a pick reuses t-2..t-8 (default tuned)")
    p.add_argument("--p-long", type=float, default=0.0,
                   help="trace: prob a pick reuses an expert last seen at t-9..t-LONG_WINDOW (default 0: none)")
    p.add_argument("--long-window", type=int, default=64, help="trace: see --p-long (default 64)")
    return p


def main(argv):
    args = parser().parse_args(argv)
    if args.tokens < 2:
        parser().error("--tokens must be at least 2")
    for f in args.pool:
        if not 0 < f <= 1:
            parser().error(f"--pool fractions must be in (0, 1], got {f}")
    for a in args.prefetch_accuracy:
        if not 0 <= a <= 1:
            parser().error(f"--prefetch-accuracy values must be in [0, 1], got {a}")
    arch = ARCHS[args.arch]
    params = default_params(arch)
    try:
        params = TraceParams(params.p_repeat if args.p_repeat is None else args.p_repeat,
                             params.p_recent if args.p_recent is None else args.p_recent,
                             args.p_long, args.long_window)
    except ValueError as e:
        parser().error(str(e))
    t0 = time.perf_counter()
    trace = generate(arch, args.tokens, params, seed=args.seed)
    st = measure(trace, arch.experts)
    print(f"trace: {arch.name}, {arch.layers} layers x {arch.experts} experts top-{arch.top_k}, {args.tokens} tokens, "
          f"seed {args.seed}, p_repeat {params.p_repeat}, p_recent {params.p_recent}"
          + (f", p_long {params.p_long} over t-9..t-{params.long_window}" if params.p_long else "")
          + f" "
          f"({time.perf_counter() - t0:.1f} s)")
    print(f"  picks seen at t-1: {st['repeat_prev']:.1%}   within t-1..t-8: {st['repeat_within_8']:.1%}   "
          f"expert popularity max/mean {st['popularity_max_over_mean']:.2f}, "
          f"min/mean {st['popularity_min_over_mean']:.2f} (per layer, averaged)")
    print(f"  one expert record {arch.record_bytes:,} B; hot half-life {args.half_life:g} tokens; "
          f"prefetch cap {args.max_inflight} reads\n")
    head = (f"{'policy':<6} {'pool':>5} {'slots':>6} {'prefetch':>8} {'hit rate':>8} {'stalls/tok':>10} "
            f"{'MB read/tok':>11} {'prefetch/tok':>12} {'pf used':>7}")
    print(head)
    print("-" * len(head))
    for pool in args.pool:
        for policy in args.policy:
            for acc in args.prefetch_accuracy:
                r = simulate(arch, trace, pool, policy, acc, half_life_tokens=args.half_life, warmup=args.warmup,
                             max_inflight=args.max_inflight, seed=args.seed)
                pf = f"{acc:.0%}" if acc > 0 else "off"
                used = f"{r.prefetch_used_fraction:.0%}" if acc > 0 else "-"
                print(f"{policy:<6} {pool:>5.0%} {r.slots:>6} {pf:>8} {r.hit_rate:>8.1%} {r.stalls_per_token:>10.1f} "
                      f"{r.bytes_per_token / 1e6:>11.1f} {r.prefetch_issued_per_token:>12.1f} {used:>7}", flush=True)
    return 0
