"""Scores one browser engine run (written by tests/browser/engine.spec.js) with diskformer/reference/protocol.py.

    .venv/bin/python tests/browser/check_protocol.py RUN.json      # prints the protocol report; exit 1 on FAIL

RUN.json: {"stem", "kv", "prompts": [{"index", "step0_full_max_abs", "steps": [{"argmax", "lp": [logprobs of the
refs' 5 stored ids], "top"}, ...]}, ...]}. The per-step metrics are the protocol's (top1: argmax == greedy_ids[s];
d5: max |engine logprob - stored logprob| over the stored ids); protocol.check_limits applies refs/tolerances.json.
An F32 model with an f16 cache is scored up to the first router near-tie the numpy reference finds (as
tests/engine/test_engine_node.py does): past one, either expert choice is right and later logits move by O(1).
"""
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "engine")]

from diskformer.reference import protocol  # noqa: E402


def prompt_metrics(prompt: dict, run: dict) -> protocol.PromptMetrics:
    steps = run["steps"]
    if len(steps) != len(prompt["steps"]):
        raise ValueError(f"prompt {prompt['index']}: {len(steps)} steps run, the refs have {len(prompt['steps'])}")
    top1, d5, margins = [], [], []
    for s, (got, stored) in enumerate(zip(steps, prompt["steps"])):
        if len(got["lp"]) != len(stored["top"]):
            raise ValueError(f"prompt {prompt['index']} step {s}: {len(got['lp'])} logprobs for the stored ids")
        d5.append(max(abs(a - float(t[1])) for a, t in zip(got["lp"], stored["top"])))
        top1.append(int(got["argmax"]) == int(prompt["greedy_ids"][s]))
        margins.append(float(stored["margin"]))
    return protocol.PromptMetrics(int(prompt["index"]), top1, d5, margins, float(run["step0_full_max_abs"]))


def truncate_at_router_tie(m: protocol.PromptMetrics, stem: str, prompt: dict) -> protocol.PromptMetrics:
    from test_engine_node import steps_before_routing_tie

    n = max(1, steps_before_routing_tie(REPO / "fixtures" / "models" / f"{stem}.gguf", prompt))
    return protocol.PromptMetrics(m.index, m.top1[:n], m.d5[:n], m.margins[:n], m.step0_full_max_abs)


def check(run: dict) -> protocol.CheckResult:
    stem, kv = run["stem"], run["kv"]
    refs = {p["index"]: p for p in protocol.load_refs(stem)["prompts"]}
    tolerances = protocol.load_tolerances()
    metrics = []
    for r in run["prompts"]:
        m = prompt_metrics(refs[r["index"]], r)
        if kv == "f16" and tolerances["models"][stem]["weights"] == "F32":
            m = truncate_at_router_tie(m, stem, refs[r["index"]])
        metrics.append(m)
    return protocol.check_limits(stem, metrics, tolerances, kv=kv, engine="f32act")


def main(argv) -> int:
    result = check(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    print(result.report())
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
