"""Gate refs from llama.cpp itself, through llama-cpp-python (which carries and builds llama.cpp).

    python -m diskformer.gate.llama_refs MODEL.gguf OUT.json [--questions FILE] [--max-tokens 64]

Run it with a Python that has llama-cpp-python (and numpy) installed; it does not need to be the project's venv,
only py_engine importable (run it from the repo root). For each question the prompt is rendered with the engine's
own chat template (py_engine.tokenizer.render_chat, so the page is asked the same thing) and tokenized by
llama.cpp with special tokens parsed; the gate checks later that the engine's tokenizer gives the same ids.
llama.cpp then decodes greedily, one token at a time from the raw logits (no sampler), with the fixtures'
reference configuration: exact attention (flash attention off) and an f32 KV cache. Each step's margin is the
top-1 minus top-2 logit. A reply ends at an end-of-generation token (the engine's stop set: eos, <|im_end|>,
<|endoftext|>) or after --max-tokens.
"""
import argparse
import hashlib
import sys
from pathlib import Path

# the demo model's questions (demo/README.md); --questions replaces them
DEFAULT_QUESTIONS = ["What does json.dumps do?", "What does os.path.join do?", "What is the random module for?",
                     "What is collections.Counter?", "How do I read a file in Python?"]
STOP_TEXTS = ("<|im_end|>", "<|endoftext|>")
GGML_TYPE_F32 = 0
# Q8_0 weights: llama.cpp quantizes activations to Q8_0, the engine keeps them f32; the fixtures' measured limit
# for that pair (refs/tolerances.json, f32_activations.top1_required_if_margin_ge)
DEFAULT_TOLERANCE = 4.0


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _arch(path: Path) -> str:
    from py_engine.gguf import read_gguf_file

    return read_gguf_file(str(path)).metadata["general.architecture"]


def greedy_reply(llm, prompt_ids, max_tokens, stop_ids):
    """llama.cpp's greedy ids after `prompt_ids`, each step's margin, and whether it ended on a stop token."""
    import numpy as np

    llm.reset()
    llm.eval(prompt_ids)
    ids, margins = [], []
    while True:
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top2 = np.argpartition(-logits, 2)[:2]
        top2 = top2[np.argsort(-logits[top2])]
        token = int(top2[0])
        margins.append(float(logits[top2[0]] - logits[top2[1]]))
        if token in stop_ids:
            return ids, margins, True
        ids.append(token)
        if len(ids) >= max_tokens:
            return ids, margins, False
        llm.eval([token])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m diskformer.gate.llama_refs", description=__doc__.split("\n")[0])
    p.add_argument("model", type=Path, help="GGUF file")
    p.add_argument("out", type=Path, help="gate refs JSON to write")
    p.add_argument("--questions", type=Path, help="a text file, one user question per line")
    p.add_argument("--thinking", action="store_true", help="render the prompts with thinking on")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--n-ctx", type=int, default=1024)
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE, help="argmax margin (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        from llama_cpp import Llama
    except ImportError:
        print("llama_refs: needs llama-cpp-python (pip install llama-cpp-python) in this Python", file=sys.stderr)
        return 2
    from py_engine.tokenizer import render_chat

    questions = DEFAULT_QUESTIONS
    if args.questions is not None:
        questions = [q.strip() for q in args.questions.read_text(encoding="utf-8").splitlines() if q.strip()]
    arch = _arch(args.model)
    llm = Llama(model_path=str(args.model), n_ctx=args.n_ctx, n_batch=args.n_ctx, logits_all=True, seed=0,
                n_threads=2, flash_attn=False, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False)
    stop_ids = {llm.token_eos()}
    for text in STOP_TEXTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if len(ids) == 1:
            stop_ids.add(ids[0])
    conversations = []
    for q in questions:
        messages = [{"role": "user", "content": q}]
        prompt = render_chat(messages, arch, args.thinking)
        prompt_ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        ids, margins, stopped = greedy_reply(llm, prompt_ids, args.max_tokens, stop_ids)
        text = llm.detokenize(ids).decode("utf-8", errors="replace")
        conversations.append({"messages": messages, "thinking": args.thinking, "prompt_ids": prompt_ids,
                              "reply_ids": ids, "reply_stop": stopped, "reply_text": text,
                              "reply_pieces": [llm.detokenize([i]).decode("utf-8", errors="backslashreplace")
                                               for i in ids],
                              "margins": margins})
        print(f"{q!r}: {len(ids)} ids{' + stop' if stopped else ''}, min margin {min(margins):.3g}: {text!r}")
    import llama_cpp

    data = {"about": f"made by diskformer.gate.llama_refs with llama-cpp-python {llama_cpp.__version__} "
                     "(greedy from raw logits, flash attention off, f32 KV cache)",
            "model": {"name": args.model.name, "sha256": _sha256(args.model)},
            "tolerance": {"argmax_margin": args.tolerance},
            "conversations": conversations}
    from .make_refs import dumps

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(data), encoding="utf-8")
    print(f"wrote {args.out}: {len(conversations)} conversations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
