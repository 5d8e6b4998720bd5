"""Gate refs from the shared fixtures: the ChatML prompt (index 1) of refs/<stem>.json as a one-message chat.

    python -m diskformer.gate.make_refs --fixture micro-qwen3moe-f32 tests/gate/micro-qwen3moe-f32.gate.json
    python -m diskformer.gate.make_refs --fixture micro-qwen3moe-f32 --kv f32 tests/gate/micro-qwen3moe-f32.kv-f32.gate.json

The page only answers conversations, so the user message is cut out of the prompt text and the engine's own chat
template must render it back to exactly llama.cpp's prompt ids (checked here with py_engine's template and
tokenizer, for thinking on and off); a fixture whose prompt the template cannot reproduce is refused. The fixture's
greedy run ignores end-of-generation tokens, so the reply is cut before the first one (and marked reply_stop).
The tolerance is the fixture's own limit (refs/tolerances.json) for this engine: f32 activations, and the KV
cache format the page loads with (f16 unless --kv f32).

gemma4 fixtures (--fixtures ../shared/fixtures-gemma4 --models fixtures/models-gemma4): the prompt is one Gemma
user turn; the engine computes GELU exactly, so an F32 model's margins and limit are the exact-GELU refs' (whose
argmax must equal the greedy ids).
"""
import argparse
import json
import re
import sys
from pathlib import Path

from .model_file import REPO, LocalModel, sha256_file

FIXTURES = REPO.parent / "shared" / "fixtures"
CHATML = re.compile(r"<\|im_start\|>user\n(.*)<\|im_end\|>\n<\|im_start\|>assistant\n\Z", re.S)
GEMMA = re.compile(r"<bos><\|turn>user\n(.*)<turn\|>\n<\|turn>model\n<\|channel>thought\n<channel\|>\Z", re.S)
CHAT_PROMPT = 1
NUMBER_LIST = re.compile(r"\[\s+([-+\d.eE,\s]+?)\s+\]")


def tolerance_for(tolerances: dict, stem: str, kv: str) -> float:
    t = tolerances["models"].get(stem)
    if t is None:
        raise SystemExit(f"make_refs: no tolerance for {stem} in refs/tolerances.json")
    if t["weights"] == "F32":
        key = f"{kv}_kv_cache" if f"{kv}_kv_cache" in t else f"{kv}_kv_cache_exact_gelu"  # gemma4: exact GELU
        return t[key]["top1_required_if_margin_ge"]
    return t["f32_activations"]["top1_required_if_margin_ge"]  # the engine computes f32 activations


def build(stem: str, fixtures: Path, models: Path, kv: str) -> dict:
    refs = json.loads((fixtures / "refs" / f"{stem}.json").read_text(encoding="utf-8"))
    tolerances = json.loads((fixtures / "refs" / "tolerances.json").read_text(encoding="utf-8"))
    prompt = refs["prompts"][CHAT_PROMPT]
    m = CHATML.match(prompt["text"]) or GEMMA.match(prompt["text"])
    if m is None:
        raise SystemExit(f"make_refs: prompt {CHAT_PROMPT} of {stem} is not one ChatML or Gemma user turn")
    messages = [{"role": "user", "content": m.group(1)}]
    model_path = models / f"{stem}.gguf"
    if not model_path.is_file():
        raise SystemExit(f"make_refs: {model_path} is missing (make it with ../shared/fixtures/make_models.py)")
    local = LocalModel(model_path)
    thinking = next((t for t in (True, False) if local.prompt_ids(messages, t) == prompt["prompt_ids"]), None)
    if thinking is None:
        raise SystemExit(f"make_refs: the engine's {local.arch} chat template does not render prompt "
                         f"{CHAT_PROMPT} of {stem} to llama.cpp's prompt ids (with thinking on or off), so the "
                         "page cannot be asked llama.cpp's question")
    ids = list(prompt["greedy_ids"])
    exact = prompt.get("exact_gelu")  # gemma4 F32 refs: what an exact GELU gives along the same ids
    if exact is not None and exact["argmax"] != ids:
        raise SystemExit(f"make_refs: {stem}'s exact-GELU argmax leaves the greedy ids; no gate refs from it")
    margins = [s["margin"] for s in (exact or prompt)["steps"]]
    load_options = {"kv": kv} if kv != "f16" else {}
    stop_at = next((i for i, t in enumerate(ids) if t in local.tokenizer.stop_ids), None)
    if stop_at is not None:
        ids, margins = ids[:stop_at], margins[:stop_at + 1]
    return {
        "about": f"made by diskformer.gate.make_refs from the shared fixture refs/{stem}.json (prompt "
                 f"{CHAT_PROMPT}, llama.cpp {refs['about'].get('llama_cpp', {}).get('build_info', '')})".strip(),
        "model": {"name": model_path.name, "sha256": sha256_file(model_path),
                  **({"load_options": load_options} if load_options else {})},
        "tolerance": {"argmax_margin": tolerance_for(tolerances, stem, kv)},
        "conversations": [{
            "messages": messages, "thinking": thinking, "prompt_ids": prompt["prompt_ids"],
            "reply_ids": ids, "reply_stop": stop_at is not None,
            "reply_text": local.tokenizer.decode(ids), "reply_pieces": [local.piece(i) for i in ids],
            "margins": margins,
        }],
    }


def dumps(data: dict) -> str:
    """Indented JSON with every list of numbers on one line (ids and margins stay readable and diffable)."""
    text = json.dumps(data, indent=1, ensure_ascii=False)
    return NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m diskformer.gate.make_refs", description=__doc__.split("\n")[0])
    p.add_argument("--fixture", required=True, help="fixture model stem, e.g. micro-qwen3moe-f32")
    p.add_argument("out", type=Path, help="gate refs JSON to write")
    p.add_argument("--fixtures", type=Path, default=FIXTURES, help="the shared fixtures folder")
    p.add_argument("--models", type=Path, default=REPO / "fixtures" / "models", help="folder of the fixture GGUFs")
    p.add_argument("--kv", choices=("f16", "f32"), default="f16", help="KV cache format the page loads with")
    args = p.parse_args(argv)
    data = build(args.fixture, args.fixtures, args.models, args.kv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(data), encoding="utf-8")
    c = data["conversations"][0]
    print(f"wrote {args.out}: {len(c['reply_ids'])} reply ids, tolerance {data['tolerance']['argmax_margin']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
