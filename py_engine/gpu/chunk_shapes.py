"""The shapes the prefill-chunk launchers (chunk_kernels.py) are recorded with: small frozen records built from the
model config where a layer's chunk dispatches are planned, so each launcher takes its buffers and one shape."""
from dataclasses import dataclass


@dataclass(frozen=True)
class GemmRows:
    """Where a chunk GEMM reads row t of X (t·x_stride + x_base) and writes row t of Y (t·y_stride + y_base)."""
    x_stride: int
    y_stride: int
    x_base: int = 0
    y_base: int = 0


@dataclass(frozen=True)
class AttentionShape:
    """Causal GQA attention of the chunk's rows: heads, head size, score scale, and the values per row of the
    queries and of the output."""
    n_head: int
    n_kv_head: int
    hd: int
    scale: float
    q_stride: int
    out_stride: int

    @classmethod
    def of(cls, cfg) -> "AttentionShape":
        """A model's attention over packed query rows (n_head · head_dim values per row in and out)."""
        hd = cfg.head_dim
        return cls(cfg.n_head, cfg.n_head_kv, hd, hd ** -0.5, cfg.n_head * hd, cfg.n_head * hd)


@dataclass(frozen=True)
class DeltaNetShape:
    """The gated DeltaNet recurrence: key and value heads, their sizes, the q/k norm's epsilon."""
    n_k_heads: int
    n_v_heads: int
    dk: int
    dv: int
    eps: float

    @classmethod
    def of(cls, cfg) -> "DeltaNetShape":
        return cls(cfg.ssm_n_group, cfg.ssm_dt_rank, cfg.ssm_d_state, cfg.head_v_dim, cfg.rms_eps)


@dataclass(frozen=True)
class ExpertRouting:
    """A layer's routed picks for the expert products: k picks per row of n_exp experts, grouped by expert
    (`grouped`, moe_group.wgsl), the expert -> pool slot map from map_base, the mask of experts in use; for a
    streamed pool its buffers and slot layout (None: the pool is one GpuMatrix holding every expert)."""
    k: int
    n_exp: int
    grouped: object
    slot_map: object
    map_base: int
    mask: object
    pool_buffers: object = None
    layout: object = None


@dataclass(frozen=True)
class ExpertGemmShape:
    """One routed product: output rows per pick; a pick's input row is pick / x_div, x_stride values each."""
    rows: int
    x_stride: int
    x_div: int
