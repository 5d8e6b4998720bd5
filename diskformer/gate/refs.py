"""The gate refs file: conversations with llama.cpp's greedy reply (ids, text, each step's top-1/top-2 margin).

    {"model": {"name": "x.gguf" | "url": "https://...", "sha256": "...", "load_options": {...}?},
     "tolerance": {"argmax_margin": 0.02},
     "conversations": [{"messages": [...], "thinking": bool, "prompt_ids": [...]?,
                        "reply_ids": [...], "reply_stop": bool?, "reply_text": "...", "margins": [...]}]}

reply_ids are llama.cpp's generated ids without the end-of-generation token; reply_stop says llama.cpp produced one
right after them (then margins has one more entry, the margin of that step). Loading checks every field, so a
malformed file fails here with its path and the field, not halfway through a browser run.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path


class RefsError(ValueError):
    pass


@dataclass
class Conversation:
    index: int
    messages: list
    thinking: bool
    reply_ids: list
    margins: list
    reply_text: str = ""
    reply_stop: bool = False
    prompt_ids: list = None
    reply_pieces: list = None

    @property
    def steps(self) -> int:
        """Steps llama.cpp took: the reply's tokens plus the end-of-generation step, if it ended there."""
        return len(self.reply_ids) + (1 if self.reply_stop else 0)

    def truncated(self, max_steps: int) -> "Conversation":
        """The first `max_steps` steps only (a shorter run; an end-of-generation past them is dropped)."""
        if max_steps is None or max_steps >= self.steps:
            return self
        n = min(max_steps, len(self.reply_ids))
        return Conversation(self.index, self.messages, self.thinking, self.reply_ids[:n], self.margins[:max_steps],
                            self.reply_text, self.reply_stop and max_steps > len(self.reply_ids),
                            self.prompt_ids, self.reply_pieces[:n] if self.reply_pieces else None)


@dataclass
class GateRefs:
    path: Path
    model: dict
    argmax_margin: float
    conversations: list = field(default_factory=list)

    @property
    def model_label(self) -> str:
        return self.model.get("name") or self.model.get("url")


def _ids(value, where) -> list:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                              for i in value):
        raise RefsError(f"{where}: expected a list of token ids (non-negative integers)")
    return list(value)


def _conversation(i, raw) -> Conversation:
    where = f"conversations[{i}]"
    if not isinstance(raw, dict):
        raise RefsError(f"{where}: expected an object")
    messages = raw.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        raise RefsError(f"{where}.messages: expected a non-empty list of {{role, content}}")
    reply_ids = _ids(raw.get("reply_ids"), f"{where}.reply_ids")
    reply_stop = bool(raw.get("reply_stop", False))
    if not reply_ids and not reply_stop:
        raise RefsError(f"{where}: an empty reply that does not stop has nothing to compare")
    margins = raw.get("margins")
    n_steps = len(reply_ids) + (1 if reply_stop else 0)
    if not isinstance(margins, list) or len(margins) != n_steps or not all(
            isinstance(m, (int, float)) and not isinstance(m, bool) and m >= 0 for m in margins):
        raise RefsError(f"{where}.margins: expected {n_steps} non-negative numbers (one per step"
                        f"{', the end-of-generation step included' if reply_stop else ''})")
    prompt_ids = raw.get("prompt_ids")
    if prompt_ids is not None:
        prompt_ids = _ids(prompt_ids, f"{where}.prompt_ids")
    pieces = raw.get("reply_pieces")
    if pieces is not None and (not isinstance(pieces, list) or len(pieces) != len(reply_ids)):
        raise RefsError(f"{where}.reply_pieces: expected one string per reply id")
    return Conversation(i, messages, bool(raw.get("thinking", False)), reply_ids, [float(m) for m in margins],
                        str(raw.get("reply_text", "")), reply_stop, prompt_ids, pieces)


def parse_refs(data: dict, path: Path = None) -> GateRefs:
    if not isinstance(data, dict):
        raise RefsError("expected a JSON object with model, tolerance and conversations")
    model = data.get("model")
    if not isinstance(model, dict) or not (isinstance(model.get("name"), str) or isinstance(model.get("url"), str)):
        raise RefsError("model: expected {name or url, sha256}")
    sha = model.get("sha256")
    if sha is not None and (not isinstance(sha, str) or len(sha) != 64):
        raise RefsError("model.sha256: expected 64 hex digits")
    if not isinstance(model.get("load_options", {}), dict):
        raise RefsError("model.load_options: expected an object")
    tol = (data.get("tolerance") or {}).get("argmax_margin")
    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or tol < 0:
        raise RefsError("tolerance.argmax_margin: expected a non-negative number")
    convs = data.get("conversations")
    if not isinstance(convs, list) or not convs:
        raise RefsError("conversations: expected a non-empty list")
    return GateRefs(path, model, float(tol), [_conversation(i, c) for i, c in enumerate(convs)])


def load_refs(path) -> GateRefs:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RefsError(f"{path}: cannot read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise RefsError(f"{path}: not JSON ({e})") from None
    try:
        return parse_refs(data, path)
    except RefsError as e:
        raise RefsError(f"{path}: {e}") from None
