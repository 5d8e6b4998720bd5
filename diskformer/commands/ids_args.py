"""The prompt / steps arguments shared by `diskformer reference` and `diskformer run` (same flags, same checks),
so the two commands take the same command lines and their JSON outputs can be compared step by step.
"""
import argparse
import json


def parse_ids(text: str) -> list:
    """A JSON list ("[1, 2]") or comma/space separated ids ("1,2,3")."""
    text = text.strip()
    try:
        values = json.loads(text) if text.startswith("[") else text.replace(",", " ").split()
        ids = [int(v) for v in values]
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a list of token ids: {text!r} (use [1,2,3] or 1,2,3)") from None
    if any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"token ids must be >= 0: {text!r}")
    return ids


def add_step_arguments(ap: argparse.ArgumentParser) -> None:
    """--ids, --teacher-force, --n and --top."""
    ap.add_argument("--ids", type=parse_ids, required=True, help="prompt token ids: JSON list or comma separated")
    ap.add_argument("--teacher-force", type=parse_ids, default=None, metavar="IDS",
                    help="feed these ids after the prompt instead of the greedy ones (k ids -> k+1 steps)")
    ap.add_argument("--n", type=int, default=None, help="number of greedy steps (default 1; not with --teacher-force)")
    ap.add_argument("--top", type=int, default=5, help="log-probabilities to print per step (default 5)")


def step_arguments_error(args):
    """The usage error in the step arguments (the command exits 2 with it), or None."""
    if args.teacher_force is not None and args.n is not None:
        return "use either --teacher-force or --n, not both"
    if args.top < 1 or (args.n is not None and args.n < 1):
        return "--top and --n must be >= 1"
    if not args.ids:
        return "--ids is empty; give at least one prompt token"
    return None
