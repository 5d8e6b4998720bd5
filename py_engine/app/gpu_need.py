"""How many GPU bytes a model needs before anything is uploaded, from its GGUF header alone.

With every expert resident (the engine's mode until the expert streamer pages them) the need is the weights as
stored (Q8_0 planes are the same bytes, split), the KV cache at the chosen context, the activations and the logits
staging row. The load refuses a model above the user's budget with this breakdown, instead of failing half-way
through an upload with an out-of-memory error.
"""
from dataclasses import asdict, dataclass


@dataclass
class GpuNeed:
    weights: int
    kv_cache: int
    activations: int
    n_ctx: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations

    def as_dict(self) -> dict:
        return dict(asdict(self), total=self.total)


def gpu_need(header, n_ctx: int, kv_format: str = "f16") -> GpuNeed:
    """Raises ValueError for an architecture the GPU engine does not run."""
    from ..models.cache import kv_cache_bytes, layer_kv_cache_bytes  # Pyodide only (the models record dispatches)
    from ..models.registry import architecture

    spec = architecture(header.architecture)
    cfg = spec.config.from_header(header)
    if cfg.n_ctx_train:
        n_ctx = min(n_ctx, cfg.n_ctx_train)
    model = spec.model()(cfg)
    from ..engine.checkpoints import DEFAULT_CHECKPOINTS, checkpoint_bytes
    # the KV cache, and the recurrent state's checkpoints kept beside it (engine/checkpoints.py)
    if hasattr(model, "kv_cache_shapes"):  # caches that differ by layer (gemma4), rings sized for a GPU's chunks
        from ..engine.decoder import DEFAULT_PREFILL_CHUNK
        shapes = model.kv_cache_shapes(n_ctx, DEFAULT_PREFILL_CHUNK)
        kv = layer_kv_cache_bytes(shapes, kv_format)
        # the checkpoints copy the rings (engine/checkpoints.py)
        kv += DEFAULT_CHECKPOINTS * layer_kv_cache_bytes([shapes[i] for i in model.ring_layers], kv_format)
    else:
        kv = kv_cache_bytes(cfg.n_kv_layers, n_ctx, cfg.n_head_kv, cfg.head_dim, kv_format)
    kv += checkpoint_bytes(model, DEFAULT_CHECKPOINTS)
    acts = 4 * sum(n for _, n in model.work_buffers()) + 4 * cfg.n_vocab  # + the logits staging buffer
    weights = sum(t.nbytes for t in header.tensors_by_name.values())
    return GpuNeed(weights=weights, kv_cache=kv, activations=acts, n_ctx=n_ctx)


def fmt_bytes(n) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
