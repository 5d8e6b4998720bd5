"""Tokenizer and chat template of the engine: llama.cpp-exact byte-level BPE (qwen2 / qwen35 pre-tokenizers)."""
from .chat import render_chat
from .decoder import StreamDecoder
from .tokenizer import Tokenizer

__all__ = ["Tokenizer", "StreamDecoder", "render_chat"]
