"""`diskformer gate REFS.json`: run the chat page headless and hold its greedy replies to llama.cpp's.

Exit status: 0 every conversation passes, 1 one or more do not, 2 a timeout, bad refs, or a page/engine/model
that cannot be started or loaded. docs/gate.md describes the refs format and the pass rule.
"""
import argparse
import sys
from pathlib import Path

from .browser import Deadline, GateStartError, LocalServer, run_driver
from .compare import STOP, compare_reply
from .model_file import LocalModel, find_model, sha256_file
from .refs import RefsError, load_refs


def _say(msg=""):
    print(msg, flush=True)


def _err(msg):
    print(f"diskformer gate: {msg}", file=sys.stderr, flush=True)


def _label(token, local, pieces=None, step=None) -> str:
    if token == STOP or isinstance(token, str):
        return str(token)
    piece = local.piece(token) if local is not None else (pieces[step] if pieces and step < len(pieces) else "")
    return f"{token} {piece!r}" if piece else str(token)


def _prepare_local(refs, args):
    """The local model file (None when it is not at hand and --site does not need it), checked against sha256."""
    name = refs.model.get("name")
    if name is None:
        if args.site is None:
            raise GateStartError("the refs name the model by url only; pass --site for a page that can fetch it")
        return None
    try:
        path = find_model(name, refs.path, args.models)
    except FileNotFoundError:
        if args.site is not None:
            return None  # the deployed page serves it; no local checks
        raise
    want = refs.model.get("sha256")
    if want is not None:
        got = sha256_file(path)
        if got != want.lower():
            raise GateStartError(f"{path}: sha256 {got} is not the refs' {want}: a different model file")
    return LocalModel(path)


def _check_prompts(refs, local) -> list:
    """Conversations whose page prompt is not llama.cpp's prompt: comparing their replies would mean nothing."""
    bad = []
    for c in refs.conversations:
        if c.prompt_ids is not None and local is not None:
            ids = local.prompt_ids(c.messages, c.thinking)
            if ids != c.prompt_ids:
                first = next((i for i, (a, b) in enumerate(zip(ids, c.prompt_ids)) if a != b),
                             min(len(ids), len(c.prompt_ids)))
                bad.append(f"conversation {c.index}: the page's prompt ({len(ids)} ids) differs from llama.cpp's "
                           f"({len(c.prompt_ids)} ids) at position {first}")
    return bad


def _report(conv, result, refs, local) -> bool:
    tol = refs.argmax_margin
    head = f"conversation {conv.index}"
    if "error" in result:
        _say(f"{head}: FAIL: the engine refused: {result['error']}")
        return False
    stats = result.get("stats") or {}
    if conv.prompt_ids is not None and stats.get("prompt_tokens") not in (None, len(conv.prompt_ids)):
        _say(f"{head}: FAIL: the page prefilled {stats['prompt_tokens']} prompt tokens, llama.cpp "
             f"{len(conv.prompt_ids)}")
        return False
    ids = [int(i) for i in result.get("token_ids") or []]
    v = compare_reply(conv, ids, result.get("stop_reason"), tol)
    speed = f", {stats['ms_per_token']:.0f} ms/token" if isinstance(stats.get("ms_per_token"), (int, float)) else ""
    if v.passed:
        if v.cut_at is None:
            _say(f"{head}: PASS: all {v.steps} steps equal llama.cpp's{speed}")
        else:
            note = " (nothing compared: the first step is already a near tie)" if v.checked == 0 else ""
            _say(f"{head}: PASS: {v.checked} of {v.steps} steps equal llama.cpp's; the comparison ends at step "
                 f"{v.cut_at}, whose margin {v.margin:.4g} is under the tolerance {tol:g}{note} (equal there "
                 f"or not, {v.agree} leading steps agree){speed}")
        return True
    _say(f"{head}: FAIL: the replies part at step {v.step} (llama.cpp's margin there {v.margin:.4g} >= {tol:g})")
    _say(f"  expected {_label(v.expected, local, conv.reply_pieces, v.step)}")
    _say(f"  got      {_label(v.got, local)}")
    _say(f"  equal before it: {conv.reply_ids[:v.step]}")
    _say(f"  llama.cpp's reply: {conv.reply_ids}{' + end of generation' if conv.reply_stop else ''}")
    _say(f"  the page's reply:  {ids} (stop_reason {result.get('stop_reason')})")
    return False


def run(args) -> int:
    deadline = Deadline(args.timeout)
    refs = load_refs(args.refs)
    if args.max_steps is not None:
        refs.conversations = [c.truncated(args.max_steps) for c in refs.conversations]
    local = _prepare_local(refs, args)
    bad = _check_prompts(refs, local)
    if bad:
        for line in bad:
            _say(f"{line}: FAIL (the chat template does not reproduce the refs' prompt)")
        return 1
    if args.site is not None:
        source = ({"kind": "url", "url": refs.model["url"]} if refs.model.get("url")
                  else {"kind": "served", "name": refs.model["name"]})
    else:
        source = {"kind": "served", "name": local.path.name}
    options = dict(refs.model.get("load_options") or {})
    jobs = [{"messages": c.messages, "thinking": c.thinking, "max_tokens": c.steps} for c in refs.conversations]
    _say(f"gate: {refs.model_label}, {len(jobs)} conversation(s), tolerance {refs.argmax_margin:g}, "
         f"timeout {args.timeout:g} s")

    if args.site is not None:
        outcome = run_driver(args.site, source, options, jobs, deadline)
    else:
        with LocalServer(local.path.parent, deadline) as server:
            _say(f"gate: serving {local.path.parent} at {server.url}")
            outcome = run_driver(server.url, source, options, jobs, deadline)

    if outcome.get("status") != "ok":
        what = "timed out" if outcome["status"] == "timeout" else "could not run"
        _err(f"{what} ({outcome.get('stage')}): {outcome.get('message')}")
        for line in outcome.get("log") or []:
            print(f"  {line}", file=sys.stderr)
        return 2
    boot, load = outcome.get("boot") or {}, outcome.get("load") or {}
    _say(f"gate: engine {boot.get('engine')} on {boot.get('adapter')}; loaded {load.get('name')} "
         f"({load.get('arch')}, KV {load.get('kv')}) in {load.get('load_seconds', 0):.1f} s")
    passed = [_report(c, r, refs, local) for c, r in zip(refs.conversations, outcome["results"])]
    n_ok = sum(passed)
    _say(f"gate: {n_ok} of {len(passed)} conversation(s) pass")
    return 0 if n_ok == len(passed) == len(refs.conversations) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="diskformer gate", description=__doc__.split("\n")[0])
    p.add_argument("refs", type=Path, help="gate refs JSON (docs/gate.md)")
    p.add_argument("--site", help="URL of a deployed chat page (default: start `diskformer serve` here)")
    p.add_argument("--timeout", type=float, default=900, help="seconds for the whole run (default 900)")
    p.add_argument("--models", type=Path, help="folder holding the model file (default: beside the refs, "
                                               "fixtures/models/, demo/)")
    p.add_argument("--max-steps", type=int, help="compare only each reply's first N steps (a quicker run)")
    args = p.parse_args(argv)
    if args.max_steps is not None and args.max_steps < 1:
        p.error("--max-steps must be at least 1")
    try:
        return run(args)
    except RefsError as e:
        _err(str(e))
        return 2
    except (GateStartError, FileNotFoundError) as e:
        _err(str(e))
        return 2
    except TimeoutError as e:
        _err(f"timed out: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
