"""Tokenizers and chat templates of the engine, llama.cpp-exact: byte-level BPE (qwen2 / qwen35 pre-tokenizers)
and Gemma 4's SentencePiece-style BPE (Tokenizer.from_gguf_metadata picks by `tokenizer.ggml.model`)."""
from .chat import render_chat
from .decoder import StreamDecoder
from .tokenizer import SpecialIds, Tokenizer

__all__ = ["SpecialIds", "Tokenizer", "StreamDecoder", "render_chat"]
