"""Engine-independent text generation: chat template -> prompt ids -> prefix reuse -> prefill -> sampling -> deltas.

Pure Python (runs in Pyodide); works with any backend that implements backend.py's interface.
"""
from .abort import AbortFlag
from .backend import check_backend, top_candidates
from .errors import ContextFullError, GeneratorBusyError
from .generator import ABORT, CONTEXT_FULL, LENGTH, STOP, Delta, GenerationResult, Generator
from .sampling import Sampler, SamplingParams
from .stats import GenerationStats
from .thinking import ThinkingSplitter

__all__ = [
    "AbortFlag", "check_backend", "top_candidates", "ContextFullError", "GeneratorBusyError",
    "ABORT", "CONTEXT_FULL", "LENGTH", "STOP", "Delta", "GenerationResult", "Generator",
    "Sampler", "SamplingParams", "GenerationStats", "ThinkingSplitter",
]
