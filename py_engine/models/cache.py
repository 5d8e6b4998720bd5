"""The GPU state one sequence keeps: named work buffers (Activations) and the per-layer K/V caches (KVCache), and
the KV cache's size, which the budget and the app's GPU need compute before anything is allocated."""
from ..gpu.buffers import storage_buffer

KV_VALUE_BYTES = {"f16": 2, "f32": 4}  # f16 values are packed two to a u32
# work buffers that carry recurrent state across tokens (each recurrent layer's conv window and delta-rule state)
STATE_BUFFERS = ("conv_window.", "ssm_state.")


def kv_row_bytes(n_head_kv: int, head_dim: int, kv_format: str) -> int:
    """Bytes of one position's K (or V) in one layer."""
    if kv_format not in KV_VALUE_BYTES:
        raise ValueError(f"KV cache format {kv_format!r}: use f16 or f32")
    return n_head_kv * head_dim * KV_VALUE_BYTES[kv_format]


def kv_cache_bytes(n_kv_layers: int, n_ctx: int, n_head_kv: int, head_dim: int, kv_format: str) -> int:
    """What KVCache allocates: K and V of n_ctx positions in each layer that owns a cache."""
    return 2 * n_kv_layers * n_ctx * kv_row_bytes(n_head_kv, head_dim, kv_format)


class Activations:
    """Named f32 work buffers, allocated once at load (the token loop allocates nothing)."""

    def __init__(self, gpu):
        self.gpu = gpu
        self.buffers = {}
        self.nbytes = 0

    def add(self, name: str, n_values: int):
        self.buffers[name] = storage_buffer(self.gpu, 4 * n_values, name)
        self.nbytes += 4 * n_values
        return self.buffers[name]

    def __getitem__(self, name):
        return self.buffers[name]

    def release(self):
        for b in self.buffers.values():
            b.destroy()
        self.buffers.clear()


class KVCache:
    """Per-layer K and V caches: n_ctx rows of n_kv_heads * head_dim values, f16 packed in u32 or f32."""

    def __init__(self, gpu, n_layers: int, n_ctx: int, n_kv_heads: int, head_dim: int, kv_format: str):
        row_bytes = kv_row_bytes(n_kv_heads, head_dim, kv_format)
        self.n_ctx = n_ctx
        self.kv_format = kv_format
        self.nbytes = kv_cache_bytes(n_layers, n_ctx, n_kv_heads, head_dim, kv_format)
        self.k = [storage_buffer(gpu, n_ctx * row_bytes, f"cache_k.{i}") for i in range(n_layers)]
        self.v = [storage_buffer(gpu, n_ctx * row_bytes, f"cache_v.{i}") for i in range(n_layers)]

    def release(self):
        for b in self.k + self.v:
            b.destroy()


def layer_kv_cache_bytes(shapes, kv_format: str) -> int:
    """What LayerKVCache allocates for `shapes` ([(rows, KV heads, head dim)] per layer): K and V."""
    return 2 * sum(rows * kv_row_bytes(n_kv, hd, kv_format) for rows, n_kv, hd in shapes)


class LayerKVCache:
    """Per-layer K and V caches whose shapes differ by layer: layer i holds shapes[i] = (rows, n_kv_heads, head_dim)
    (gemma4: a sliding-window layer keeps a ring of its window's rows, a global one n_ctx rows). n_ctx: the
    positions a sequence may reach."""

    def __init__(self, gpu, shapes, n_ctx: int, kv_format: str):
        self.n_ctx = n_ctx
        self.kv_format = kv_format
        self.rows = [rows for rows, _, _ in shapes]
        sizes = [rows * kv_row_bytes(n_kv, hd, kv_format) for rows, n_kv, hd in shapes]
        self.nbytes = layer_kv_cache_bytes(shapes, kv_format)
        self.k = [storage_buffer(gpu, n, f"cache_k.{i}") for i, n in enumerate(sizes)]
        self.v = [storage_buffer(gpu, n, f"cache_v.{i}") for i, n in enumerate(sizes)]

    def release(self):
        for b in self.k + self.v:
            b.destroy()
