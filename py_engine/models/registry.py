"""Every architecture the engine runs, in one list. Each lives in its own folder, py_engine/models/<name>/:
config.py (hyper-parameters from the GGUF; pure Python, the numpy reference reads it too), weights.py (the tensors
by their GGUF names), decode.py and prefill.py (the layer's per-token and per-chunk dispatch plans, named after
llama.cpp's src/models/<name>.cpp builders) and model.py (the class the engine loads). Adding one is a folder and a
line here.

Pure Python: the GGUF support check, the CPython host and the reference import this module; the model classes
(which record WebGPU dispatches) are imported only when asked for.
"""
from dataclasses import dataclass
from importlib import import_module

from .gemma4.config import Gemma4Config
from .qwen35moe.config import Qwen35MoeConfig
from .qwen3moe.config import Qwen3MoeConfig

# the tensor types the GPU kernels dequantise (engine/gpu_weights.py), by their GGML names
GPU_TENSOR_TYPES = ("F32", "Q8_0")


@dataclass(frozen=True)
class CpuExperts:
    """How the CPU expert workers (engine/cpu_tier_path.py) compute an architecture's routed experts and where their
    weighted sum joins the GPU's."""
    activation: str = "swiglu"  # between the gate/up and the down products (web/cpu_tier/plan.js ACTIVATIONS)
    input: str = "xn"  # the activation buffer the routed experts multiply
    # "h": added into h right after the layer's residency check (the routed sum goes straight into the residual);
    # "moe_out": added into the routed sum before what the model does with it (gemma4 normalises it)
    sum_into: str = "h"
    # the GGUF tensor blk.N.<down_scale> of per-expert output scales (the GPU's combine multiplies each routing
    # weight by its expert's), folded into the routing weights the workers take
    down_scale: str | None = None


@dataclass(frozen=True)
class Architecture:
    name: str  # general.architecture, as llama.cpp names it
    config: type  # its from_header(header) reads the `{name}.*` keys
    model_class: str  # the class in models/<name>/model.py
    # the whole sequence state is the KV cache: a shorter prefix is a smaller position (no recurrent layers)
    attention_only: bool
    tensor_type_names: tuple = GPU_TENSOR_TYPES
    cpu_experts: CpuExperts = CpuExperts()  # how the CPU expert workers compute its routed experts

    @property
    def tensor_types(self) -> frozenset:
        return _ggml_types(self.tensor_type_names)

    def model(self) -> type:
        return getattr(import_module(f"{__package__}.{self.name}.model"), self.model_class)


ARCHITECTURES = {a.name: a for a in (
    Architecture("qwen3moe", Qwen3MoeConfig, "Qwen3Moe", attention_only=True),
    Architecture("qwen35moe", Qwen35MoeConfig, "Qwen35Moe", attention_only=False),
    # sliding-window layers keep only their window's rows (a ring): a shorter prefix cannot be resumed from
    Architecture("gemma4", Gemma4Config, "Gemma4", attention_only=False,
                 tensor_type_names=GPU_TENSOR_TYPES + ("Q4_0", "Q6_K"),
                 cpu_experts=CpuExperts("geglu", "xe", "moe_out", "ffn_down_exps.scale")),
)}
NAMES = tuple(ARCHITECTURES)


def architecture(name) -> Architecture:
    """The registered architecture `name`; a ValueError naming those the engine runs otherwise."""
    arch = ARCHITECTURES.get(name)
    if arch is None:
        raise ValueError(f"architecture {name!r} is not supported by the engine (it runs {', '.join(NAMES)})")
    return arch


def tensor_types(name) -> frozenset:
    """The GGML tensor types the engine runs for architecture `name` (the GPU kernels' for one it does not run, so
    the support check can name the architecture as the reason)."""
    arch = ARCHITECTURES.get(name)
    return arch.tensor_types if arch is not None else _ggml_types(GPU_TENSOR_TYPES)


def _ggml_types(names) -> frozenset:
    """gguf.GGMLType members (imported here: the gguf package's support check imports this module)."""
    from ..gguf.types import GGMLType
    return frozenset(GGMLType[name] for name in names)


def config_from_header(header):
    """The architecture's config read from a GGUF header (gguf.GGUFHeader)."""
    return architecture(header.architecture).config.from_header(header)
