"""The fixtures' comparison protocol (shared/fixtures/README.md section 4) as functions, for any engine.

An engine is scored teacher-forced: for each prompt of `refs/<stem>.json`, feed `prompt_ids`, then
`greedy_ids[0..30]` one at a time, and keep the logits at the 32 positions. From those and the stored refs only:

- top1: engine argmax == greedy_ids[s];
- d5: max over the 5 stored tokens of |engine logprob - stored logprob| (logprob over the full vocabulary);
- step 0: max over the vocabulary of |engine logit - refs/<stem>.<i>.logits.f32| (raw logits).

`check_limits` then applies `refs/tolerances.json`. Nothing here depends on the reference model: GPU engine tests
use it the same way.

    refs = load_refs("micro-qwen3moe-f32")
    prompts = [prompt_metrics(p, engine_logits(p), load_step0_logits("micro-qwen3moe-f32", p["index"]))
               for p in refs["prompts"]]
    result = check_limits("micro-qwen3moe-f32", prompts, load_tolerances())
    assert result.passed, result.report()
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# the shared fixtures sit beside the repository: <repo>/../shared/fixtures/refs (DISKFORMER_SHARED names another
# place for the shared folder, as in tests/conftest.py)
SHARED_DIR = Path(os.environ.get("DISKFORMER_SHARED") or Path(__file__).resolve().parents[2].parent / "shared")
DEFAULT_REFS_DIR = SHARED_DIR / "fixtures" / "refs"
GEMMA4_REFS_DIR = SHARED_DIR / "fixtures-gemma4" / "refs"

KV_CHOICES = ("f32", "f16")
ENGINE_CHOICES = ("f32act", "q8emu")  # f32 activations, or emulating ggml's Q8_0 activation quantisation


# --- reading the refs -------------------------------------------------------------------------------------------
def _dir(refs_dir) -> Path:
    return Path(refs_dir) if refs_dir is not None else DEFAULT_REFS_DIR


def load_refs(stem: str, refs_dir=None) -> dict:
    path = _dir(refs_dir) / f"{stem}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no refs for model {stem!r}: {path} does not exist")
    return json.loads(path.read_text(encoding="utf-8"))


def load_step0_logits(stem: str, index: int, refs_dir=None, variant: str | None = None) -> np.ndarray:
    """The full step-0 logits of prompt `index`: n_vocab little-endian float32, no header. variant: e.g.
    'exact_gelu' for the gemma4 F32 refs computed with an exact GELU (`<stem>.<i>.exact_gelu.logits.f32`)."""
    name = f"{stem}.{index}.logits.f32" if variant is None else f"{stem}.{index}.{variant}.logits.f32"
    path = _dir(refs_dir) / name
    if not path.is_file():
        raise FileNotFoundError(f"no step-0 logits for {stem!r} prompt {index}: {path} does not exist")
    return np.fromfile(path, dtype="<f4")


def exact_gelu_prompt(prompt: dict) -> dict:
    """A prompt entry that scores against its exact-GELU refs (gemma4 F32 models, prompts[i].exact_gelu): the same
    teacher-forced sequence, with the exact-GELU top-5, margins and argmax in place of steps and greedy_ids (feed
    the original prompt's greedy_ids, score with this view)."""
    ref = prompt["exact_gelu"]
    return dict(prompt, steps=ref["steps"], greedy_ids=ref["argmax"])


def load_tolerances(refs_dir=None) -> dict:
    return json.loads((_dir(refs_dir) / "tolerances.json").read_text(encoding="utf-8"))


# --- metrics ----------------------------------------------------------------------------------------------------
def log_softmax(logits) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


@dataclass
class PromptMetrics:
    """Per-step metrics of one prompt (lists have one entry per scored step)."""
    index: int
    top1: list
    d5: list
    margins: list
    step0_full_max_abs: float | None = None  # None: the step-0 full logits were not compared


def prompt_metrics(prompt: dict, step_logits, step0_reference=None) -> PromptMetrics:
    """Score one prompt entry of refs/<stem>.json.

    step_logits: a sequence of logits vectors (any float dtype); step s scores the token after
    prompt_ids + greedy_ids[:s]. Fewer steps than stored are allowed (only those are scored), more are not.
    step0_reference: the prompt's .logits.f32 vector, to compare step 0 over the whole vocabulary.
    """
    steps = prompt["steps"]
    rows = list(step_logits)
    if not rows:
        raise ValueError(f"prompt {prompt.get('index')}: no logits given")
    if len(rows) > len(steps):
        raise ValueError(f"prompt {prompt.get('index')}: {len(rows)} logits vectors for {len(steps)} stored steps")
    top1, d5, margins = [], [], []
    for s, row in enumerate(rows):
        row = np.asarray(row, dtype=np.float64).reshape(-1)
        stored = steps[s]
        lp = log_softmax(row)
        ids = [int(t[0]) for t in stored["top"]]
        if max(ids) >= row.size:
            raise ValueError(f"prompt {prompt.get('index')} step {s}: logits have {row.size} entries, "
                             f"the refs name token {max(ids)}")
        d5.append(float(max(abs(lp[i] - float(t[1])) for i, t in zip(ids, stored["top"]))))
        top1.append(int(np.argmax(row)) == int(prompt["greedy_ids"][s]))
        margins.append(float(stored["margin"]))
    full = None
    if step0_reference is not None:
        ref = np.asarray(step0_reference, dtype=np.float64).reshape(-1)
        row0 = np.asarray(rows[0], dtype=np.float64).reshape(-1)
        if ref.shape != row0.shape:
            raise ValueError(f"prompt {prompt.get('index')}: step-0 logits have {row0.size} entries, "
                             f"the reference {ref.size}")
        full = float(np.max(np.abs(row0 - ref)))
    return PromptMetrics(int(prompt.get("index", 0)), top1, d5, margins, full)


@dataclass
class Summary:
    """Aggregates over all scored steps of all prompts."""
    n_prompts: int
    n_steps: int
    d5_median: float
    d5_p90: float
    d5_max: float
    top1_agreement: float
    step0_full_max_abs: float | None
    max_margin_with_top1_mismatch: float | None
    worst_d5: tuple  # (prompt index, step, d5)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def summarize(prompts) -> Summary:
    prompts = list(prompts)
    if not prompts:
        raise ValueError("no prompt metrics to summarize")
    d5 = np.array([v for p in prompts for v in p.d5])
    top1 = np.array([v for p in prompts for v in p.top1])
    mism = [m for p in prompts for m, ok in zip(p.margins, p.top1) if not ok]
    fulls = [p.step0_full_max_abs for p in prompts if p.step0_full_max_abs is not None]
    worst = max(((p.index, s, v) for p in prompts for s, v in enumerate(p.d5)), key=lambda t: t[2])
    return Summary(len(prompts), int(d5.size), float(np.median(d5)), float(np.percentile(d5, 90)),
                   float(d5.max()), float(top1.mean()), max(fulls) if fulls else None,
                   max(mism) if mism else None, worst)


# --- pass / fail ------------------------------------------------------------------------------------------------
@dataclass
class CheckResult:
    model: str
    passed: bool
    reasons: list = field(default_factory=list)  # why it failed (empty when passed)
    limits: dict = field(default_factory=dict)
    summary: Summary | None = None

    def report(self) -> str:
        s = self.summary
        head = (f"{self.model}: {'PASS' if self.passed else 'FAIL'} over {s.n_steps} steps of {s.n_prompts} prompts: "
                f"d5 median {s.d5_median:.3g} max {s.d5_max:.3g}, top-1 {s.top1_agreement:.3f}, step-0 full "
                f"{'n/a' if s.step0_full_max_abs is None else format(s.step0_full_max_abs, '.3g')}; limits {self.limits}")
        return "\n".join([head] + [f"  - {r}" for r in self.reasons])


def _margin_failures(prompts, threshold):
    return [(p.index, s, m) for p in prompts for s, (m, ok) in enumerate(zip(p.margins, p.top1))
            if not ok and m >= threshold]


def check_limits(model_stem: str, metrics, tolerances, kv: str = "f32", engine: str = "f32act",
                 limits_key: str | None = None) -> CheckResult:
    """Apply refs/tolerances.json to the metrics of one model.

    metrics: a list of PromptMetrics (one per prompt scored). tolerances: the parsed tolerances.json (or a path).
    kv: the engine's KV cache precision ('f32' or 'f16'). engine: 'f32act' (f32 activations) or 'q8emu' (emulates
    ggml's Q8_0 activation quantisation). F32 models use the kv-dependent per-step limits whatever the engine
    (llama.cpp does not quantise activations for F32 weights); Q8_0 models use the engine-dependent statistical
    limits whatever the kv (an f16 cache moves them far less than those limits); gemma4's Q4_0 models likewise.
    limits_key: for F32 models, the entry's limits to use instead of the kv-dependent one (gemma4's F32 models
    name theirs by reference set and GELU: 'f32_kv_cache_exact_gelu', 'f32_kv_cache_ggml_gelu', ...).
    """
    if kv not in KV_CHOICES:
        raise ValueError(f"kv must be one of {KV_CHOICES}, not {kv!r}")
    if engine not in ENGINE_CHOICES:
        raise ValueError(f"engine must be one of {ENGINE_CHOICES}, not {engine!r}")
    if isinstance(tolerances, (str, Path)):
        tolerances = json.loads(Path(tolerances).read_text(encoding="utf-8"))
    models = tolerances.get("models", {})
    if model_stem not in models:
        raise KeyError(f"tolerances have no entry for model {model_stem!r} (known: {', '.join(sorted(models))})")
    entry = models[model_stem]
    prompts = list(metrics)
    summary = summarize(prompts)
    reasons = []
    if entry["weights"] == "F32":
        key = limits_key or ("f32_kv_cache" if kv == "f32" else "f16_kv_cache")
        if key not in entry:
            raise KeyError(f"tolerances for {model_stem!r} have no {key!r} limits "
                           f"(known: {', '.join(k for k in entry if isinstance(entry[k], dict))})")
        limits = entry[key]
        over = [(p.index, s, v) for p in prompts for s, v in enumerate(p.d5) if v > limits["d5_max"]]
        if over:
            i, s, v = max(over, key=lambda t: t[2])
            reasons.append(f"{len(over)} steps with d5 > {limits['d5_max']}, worst {v:.3g} (prompt {i} step {s})")
        missing = [p.index for p in prompts if p.step0_full_max_abs is None]
        if missing:
            reasons.append(f"step-0 full-vocabulary logits not compared for prompts {missing}")
        if summary.step0_full_max_abs is not None and summary.step0_full_max_abs > limits["step0_full_max_abs"]:
            reasons.append(f"step-0 full max |dlogit| {summary.step0_full_max_abs:.3g} > "
                           f"{limits['step0_full_max_abs']}")
    else:
        limits = entry["f32_activations" if engine == "f32act" else "q8_activation_emulation"]
        if summary.d5_median > limits["d5_median_max"]:
            reasons.append(f"median d5 {summary.d5_median:.3g} > {limits['d5_median_max']}")
        if summary.top1_agreement < limits["top1_agreement_min"]:
            reasons.append(f"top-1 agreement {summary.top1_agreement:.3f} < {limits['top1_agreement_min']}")
    wrong = _margin_failures(prompts, limits["top1_required_if_margin_ge"])
    if wrong:
        i, s, m = max(wrong, key=lambda t: t[2])
        reasons.append(f"{len(wrong)} argmax mismatches where the margin >= {limits['top1_required_if_margin_ge']}, "
                       f"largest margin {m:.3g} (prompt {i} step {s})")
    return CheckResult(model_stem, not reasons, reasons, dict(limits), summary)


def common_prefix_length(a, b) -> int:
    """Length of the common prefix of two id sequences (free-running decodes are reported this way)."""
    n = 0
    for x, y in zip(a, b):
        if int(x) != int(y):
            break
        n += 1
    return n


def free_run_required_prefix(prompt: dict, margin_threshold: float) -> int:
    """How many leading greedy_ids a free-running decode of an F32 model must reproduce: up to the first step whose
    stored margin is below the argmax limit."""
    for s, step in enumerate(prompt["steps"]):
        if float(step["margin"]) < margin_threshold:
            return s
    return len(prompt["steps"])
