"""Can the engine run this GGUF? Checks beyond the format: architecture, tensor types, and tensor dimensions
against the hyper-parameters in the metadata. Separate from parsing so a generic reader still reads any GGUF."""
import re

from .errors import UnsupportedGGUF
from .header import GGUFHeader
from ..models.registry import NAMES as SUPPORTED_ARCHITECTURES
from .types import ENGINE_TENSOR_TYPES
_BLOCK_TENSOR = re.compile(r"blk\.(\d+)\.")


def check_supported(header: GGUFHeader, tensor_types=ENGINE_TENSOR_TYPES) -> None:
    """Raise UnsupportedGGUF naming the first reason the engine cannot run this file."""
    if header.byte_order != "<":
        raise UnsupportedGGUF("big-endian GGUF files are not supported; the engine reads little-endian data")
    arch = header.architecture
    if arch is None:
        raise UnsupportedGGUF("the file has no general.architecture key")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedGGUF(f"unsupported architecture {arch!r}: the engine runs "
                              f"{', '.join(SUPPORTED_ARCHITECTURES)}")
    for t in header.tensors:
        if t.type not in tensor_types:
            raise UnsupportedGGUF(f"tensor {t.name!r} has type {t.type.name}, which the engine does not support "
                                  f"(it supports {', '.join(sorted(x.name for x in tensor_types))})")
    _check_dimensions(header, arch)
    _check_hyper_parameters(header, arch)


def _int_key(header: GGUFHeader, suffix: str, required: bool = True):
    key = f"{header.architecture}.{suffix}"
    value = header.metadata.get(key)
    if value is None and not required:
        return None
    if value is None:
        raise UnsupportedGGUF(f"metadata key {key!r} is missing")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UnsupportedGGUF(f"metadata key {key!r} must be a positive integer, found {value!r}")
    return value


def _expect_dims(header: GGUFHeader, name: str, want: tuple, why: str, required: bool = True):
    info = header.tensors_by_name.get(name)
    if info is None:
        if required:
            raise UnsupportedGGUF(f"tensor {name!r} is missing")
        return
    if tuple(info.dims) != want:
        raise UnsupportedGGUF(f"tensor {name!r} has dims {list(info.dims)} (GGUF ne order) but the metadata "
                              f"implies {list(want)} ({why})")


def _check_dimensions(header: GGUFHeader, arch: str) -> None:
    n_layer = _int_key(header, "block_count")
    n_embd = _int_key(header, "embedding_length")
    n_expert = _int_key(header, "expert_count")
    n_used = _int_key(header, "expert_used_count")
    n_ff_exp = _int_key(header, "expert_feed_forward_length")
    n_ff_shexp = _int_key(header, "expert_shared_feed_forward_length", required=False)
    if n_used > n_expert:
        raise UnsupportedGGUF(f"{arch}.expert_used_count is {n_used}, more than {arch}.expert_count {n_expert}")

    tokens = header.metadata.get("tokenizer.ggml.tokens")
    embd = header.tensors_by_name.get("token_embd.weight")
    if embd is None:
        raise UnsupportedGGUF("tensor 'token_embd.weight' is missing")
    n_vocab = len(tokens) if isinstance(tokens, list) else (embd.dims[1] if len(embd.dims) == 2 else -1)
    vocab_why = f"{arch}.embedding_length = {n_embd}, vocabulary of {n_vocab} tokens"
    _expect_dims(header, "token_embd.weight", (n_embd, n_vocab), vocab_why)
    _expect_dims(header, "output.weight", (n_embd, n_vocab), vocab_why, required=False)  # absent when tied

    for t in header.tensors:
        m = _BLOCK_TENSOR.match(t.name)
        if m and int(m.group(1)) >= n_layer:
            raise UnsupportedGGUF(f"tensor {t.name!r} belongs to layer {m.group(1)} but {arch}.block_count is "
                                  f"{n_layer}")

    exp_why = (f"{arch}.embedding_length = {n_embd}, expert_feed_forward_length = {n_ff_exp}, "
               f"expert_count = {n_expert}")
    for il in range(n_layer):
        p = f"blk.{il}."
        _expect_dims(header, p + "ffn_gate_inp.weight", (n_embd, n_expert), exp_why)
        if arch == "gemma4":  # gate and up fused, gate rows first
            _expect_dims(header, p + "ffn_gate_up_exps.weight", (n_embd, 2 * n_ff_exp, n_expert), exp_why)
            _expect_dims(header, p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), exp_why)
            continue
        _expect_dims(header, p + "ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), exp_why)
        _expect_dims(header, p + "ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), exp_why)
        _expect_dims(header, p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), exp_why)
        if n_ff_shexp is not None:
            sh_why = f"{arch}.embedding_length = {n_embd}, expert_shared_feed_forward_length = {n_ff_shexp}"
            _expect_dims(header, p + "ffn_gate_shexp.weight", (n_embd, n_ff_shexp), sh_why, required=False)
            _expect_dims(header, p + "ffn_up_shexp.weight", (n_embd, n_ff_shexp), sh_why, required=False)
            _expect_dims(header, p + "ffn_down_shexp.weight", (n_ff_shexp, n_embd), sh_why, required=False)


def _float_key(header: GGUFHeader, suffix: str, lo: float, hi: float, required: bool = True):
    key = f"{header.architecture}.{suffix}"
    value = header.metadata.get(key)
    if value is None:
        if required:
            raise UnsupportedGGUF(f"metadata key {key!r} is missing")
        return None
    # NaN fails both comparisons, so it is refused with the rest
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo < value < hi):
        raise UnsupportedGGUF(f"metadata key {key!r} is {value!r}; it must lie between {lo:g} and {hi:g}")
    return value


def _check_hyper_parameters(header: GGUFHeader, arch: str) -> None:
    """Values the model's math divides by, indexes with or takes roots of: each must make sense."""
    n_head = _int_key(header, "attention.head_count")
    if arch == "gemma4":  # per-layer KV heads, head dims and RoPE: its config checks them (models/gemma4/config.py)
        _float_key(header, "attention.layer_norm_rms_epsilon", 0.0, 1.0)
        return
    n_head_kv = _int_key(header, "attention.head_count_kv")
    if n_head % n_head_kv:
        raise UnsupportedGGUF(f"{arch}.attention.head_count {n_head} is not a multiple of head_count_kv {n_head_kv}")
    key_len = _int_key(header, "attention.key_length", required=False)
    _int_key(header, "attention.value_length", required=False)
    _int_key(header, "context_length", required=False)
    n_rot = _int_key(header, "rope.dimension_count", required=False)
    if n_rot is not None and (n_rot % 2 or (key_len is not None and n_rot > key_len)):
        raise UnsupportedGGUF(f"{arch}.rope.dimension_count {n_rot} must be even and at most the key length "
                              f"{key_len}")
    _float_key(header, "attention.layer_norm_rms_epsilon", 0.0, 1.0)
    _float_key(header, "rope.freq_base", 0.0, 1e12, required=False)
    if arch == "qwen35moe":
        ssm = {k: _int_key(header, f"ssm.{k}") for k in ("conv_kernel", "state_size", "group_count",
                                                          "time_step_rank", "inner_size")}
        if ssm["inner_size"] % ssm["time_step_rank"] or ssm["time_step_rank"] % ssm["group_count"]:
            raise UnsupportedGGUF(f"{arch}.ssm.inner_size {ssm['inner_size']}, time_step_rank "
                                  f"{ssm['time_step_rank']} and group_count {ssm['group_count']} do not divide")
