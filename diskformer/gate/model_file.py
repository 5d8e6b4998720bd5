"""The gated model as a local file: where it is, that it is the one the refs were made with, and its tokenizer
(to check the page's prompt against llama.cpp's and to show token pieces)."""
import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIRS = (REPO / "fixtures" / "models", REPO / "demo")


def find_model(name: str, refs_path: Path, models_dir: Path = None) -> Path:
    dirs = [models_dir] if models_dir is not None else [refs_path.parent, *DEFAULT_DIRS]
    for d in dirs:
        if (d / name).is_file():
            return d / name
    where = ", ".join(str(d) for d in dirs)
    raise FileNotFoundError(f"model {name} not found in {where}; pass --models DIR (the folder holding it)")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class LocalModel:
    def __init__(self, path: Path):
        from py_engine.gguf import read_gguf_file
        from py_engine.tokenizer import Tokenizer

        self.path = path
        header = read_gguf_file(str(path))
        self.arch = header.metadata.get("general.architecture")
        self.tokenizer = Tokenizer.from_gguf_metadata(header.metadata)

    def prompt_ids(self, messages, thinking: bool) -> list:
        """The ids the page prefills for `messages` (the engine's own template and tokenizer)."""
        from py_engine.tokenizer import render_chat

        return self.tokenizer.encode(render_chat(messages, self.arch, thinking), parse_special=True)

    def piece(self, token_id) -> str:
        if not isinstance(token_id, int):
            return ""
        try:
            return self.tokenizer.token_to_piece(token_id).decode("utf-8", errors="backslashreplace")
        except ValueError:
            return "<outside the vocabulary>"
