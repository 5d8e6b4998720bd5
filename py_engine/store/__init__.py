"""The model store: a GGUF streamed once into a model folder (header.bin, dense.bin, experts.bin, manifest.json).

layout.py plans where every source byte goes; ingest.py streams, checkpoints and resumes; catalogue.py lists,
removes and verifies; local.py holds the in-memory / directory backends and a file source; opfs.py, sources.py and
reader_pool.py are the browser side (Pyodide only). docs/store.md describes the format.
"""
from .catalogue import VerifyReport, is_complete, list_models, remove, verify
from .errors import (IngestAborted, QuotaExceeded, SourceChanged, StoreError, StoreIntegrityError,
                     StoreQuotaError)
from .ingest import DEFAULT_CHECKPOINT, DEFAULT_CHUNK, Progress, ingest
from .layout import StoreLayout, plan_units

__all__ = [
    "VerifyReport", "is_complete", "list_models", "remove", "verify", "IngestAborted", "QuotaExceeded",
    "SourceChanged", "StoreError", "StoreIntegrityError", "StoreQuotaError", "DEFAULT_CHECKPOINT", "DEFAULT_CHUNK",
    "Progress", "ingest", "StoreLayout", "plan_units",
]
