"""The prompt / steps arguments shared by `diskformer reference` and `diskformer run` (same flags, same checks),
so the two commands take the same command lines and their JSON outputs can be compared step by step.
"""
import argparse
import json
import re

# Token ids are u32 on the GPU and int64 in numpy; no vocabulary comes near this.
MAX_TOKEN_ID = (1 << 31) - 1
_INT = re.compile(r"-?[0-9]{1,30}")  # ASCII digits only (int() also takes other scripts' digits and "1_0")


def parse_ids(text: str) -> list:
    """A JSON list ("[1, 2]") or comma/space separated ids ("1,2,3")."""
    text = text.strip()
    bad = argparse.ArgumentTypeError(f"not a list of token ids: {_short(text)} (use [1,2,3] or 1,2,3)")
    try:
        if text.startswith("["):
            values = json.loads(text)
            # 1.5 or true are not ids, even though int() would take them
            if not isinstance(values, list) or not all(type(v) is int for v in values):
                raise bad
            ids = values
        else:
            parts = text.replace(",", " ").split()
            if not all(_INT.fullmatch(v) for v in parts):
                raise bad
            ids = [int(v) for v in parts]
    except (ValueError, TypeError, RecursionError):
        raise bad from None
    if any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"token ids must be >= 0: {_short(text)}")
    if any(i > MAX_TOKEN_ID for i in ids):
        raise argparse.ArgumentTypeError(f"token ids must be below 2^31: {_short(text)}")
    return ids


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:60]) + f"... ({len(text)} characters)"


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


# Without a context length in the model, steps are still bounded: a typo like --n 1000000000 must not run for days.
UNKNOWN_CONTEXT_LIMIT = 1 << 17


def positions_needed(args) -> int:
    """Positions the run feeds: the prompt, then every forced id, or every greedy id but the last."""
    fed = len(args.teacher_force) if args.teacher_force is not None else (args.n or 1) - 1
    return len(args.ids) + fed


def context_error(args, n_ctx: int, what: str):
    """The message refusing a run that needs more positions than `n_ctx` (the context `what` describes), or
    None. Refused up front: computing up to the limit and failing there wastes minutes and prints nothing."""
    limit = n_ctx if n_ctx and n_ctx > 0 else UNKNOWN_CONTEXT_LIMIT
    need = positions_needed(args)
    if need <= limit:
        return None
    room = limit - len(args.ids)
    if room < 0:
        return f"the prompt has {len(args.ids)} tokens but {what} holds {limit} positions; shorten the prompt"
    most = (f"--n {room + 1}" if args.teacher_force is None else f"{room} --teacher-force ids")
    return (f"this run needs {need} positions but {what} holds {limit}; give at most {most} "
            f"with this {len(args.ids)}-token prompt")
