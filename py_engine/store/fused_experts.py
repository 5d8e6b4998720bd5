"""Expert tensors whose gate and up matrices are one tensor (gemma4's ffn_gate_up_exps), seen as two expert tensors.

Gemma 4 stores, per layer, `blk.N.ffn_gate_up_exps.weight` with GGUF dims [hidden, 2 * ffn, experts]: each
expert's 2 * ffn rows are its gate rows, then its up rows (llama.cpp's build_moe_ffn takes the two halves so).
Rows are whole blocks, so one expert's bytes cut in half are exactly the gate matrix and the up matrix that
separate ffn_gate_exps / ffn_up_exps tensors would hold. The store lays out the same records as for separate
tensors (gate codes, up codes, gate scales, up scales, down codes, down scales; Q4_0 blocks split into nibble and
scale planes): an ExpertHalf is one half, a tensor whose expert e starts at abs_offset + e * expert_stride.
"""
import re

from ..gguf.types import BLOCK_LAYOUTS, GGMLType

FUSED_GATE_UP = re.compile(r"^blk\.(\d+)\.ffn_gate_up_exps\.weight$")


class ExpertHalf:
    """The gate or up half of a fused gate|up expert tensor, with the attributes the store layout reads."""
    __slots__ = ("name", "type", "dims", "nbytes", "abs_offset", "expert_stride")

    def __init__(self, name, ggml_type, dims, nbytes, abs_offset, expert_stride):
        self.name, self.type, self.dims = name, ggml_type, list(dims)
        self.nbytes, self.abs_offset, self.expert_stride = nbytes, abs_offset, expert_stride

    def __repr__(self):
        return f"ExpertHalf({self.name}, {GGMLType(self.type).name}, {self.dims})"


def fused_gate_up_halves(tensor):
    """{(layer, 'gate'): ExpertHalf, (layer, 'up'): ExpertHalf} for a fused gate|up expert tensor; None for any
    other tensor."""
    m = FUSED_GATE_UP.match(tensor.name)
    if m is None:
        return None
    from .layout import StoreLayoutError  # layout imports this module

    dims = list(tensor.dims)
    if len(dims) != 3 or dims[1] % 2:
        raise StoreLayoutError(f"{tensor.name} has dims {dims}, expected [in, 2 x ffn, experts]")
    n_experts = dims[2]
    if tensor.nbytes % (2 * n_experts):
        raise StoreLayoutError(f"{tensor.name}: {tensor.nbytes} bytes do not divide into {n_experts} experts' "
                               "gate and up halves")
    per_expert = tensor.nbytes // n_experts
    half = per_expert // 2
    block = BLOCK_LAYOUTS[GGMLType(tensor.type)][1]
    if half % block:
        raise StoreLayoutError(f"{tensor.name}: an expert's gate half of {half} bytes is not whole "
                               f"{GGMLType(tensor.type).name} blocks")
    half_dims = [dims[0], dims[1] // 2, n_experts]
    layer = int(m.group(1))
    return {
        (layer, "gate"): ExpertHalf(f"{tensor.name}[gate]", tensor.type, half_dims, half * n_experts,
                                    tensor.abs_offset, per_expert),
        (layer, "up"): ExpertHalf(f"{tensor.name}[up]", tensor.type, half_dims, half * n_experts,
                                  tensor.abs_offset + half, per_expert),
    }
