"""Export a trained demo checkpoint to a qwen35moe GGUF in llama.cpp's layout (as ../shared/tools/make_tiny.py writes
it: same tensor names, shapes, types and metadata keys), with the `gguf` package.

Types in a Q8_0 file: 1-D tensors, every *_norm.weight, the routers ffn_gate_inp / ffn_gate_inp_shexp, ssm_conv1d,
ssm_a and ssm_dt.bias are F32; every other matrix (embedding and output head included) is Q8_0, quantised by
gguf.quants (ggml's reference Q8_0: d = amax / 127, q = round half away from zero). --qtype f32 writes the same
tensors unquantised (the twin used to check the export against the torch model).

    python tools/demo_model/export_gguf.py --checkpoint build/demo_model/model.pt --tokenizer \\
        build/demo_model/tokenizer.json --out demo/diskformer-demo-qwen35moe-q8_0.gguf
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_torch import Config, Qwen35MoE  # noqa: E402

ARCH = "qwen35moe"
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}"
)
F32_SUFFIXES = ("norm.weight", "ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight", "ssm_a",
                "ssm_dt.bias")


def tensor_type(name: str, array: np.ndarray, qtype: str):
    if qtype == "f32" or array.ndim == 1 or name.endswith(F32_SUFFIXES):
        return gguf.GGMLQuantizationType.F32
    if array.shape[-1] % 32:
        raise ValueError(f"{name}: rows of {array.shape[-1]} values cannot be Q8_0 (need a multiple of 32)")
    return gguf.GGMLQuantizationType.Q8_0


def load_model(checkpoint: Path) -> Qwen35MoE:
    ck = torch.load(checkpoint, map_location="cpu", weights_only=False)
    model = Qwen35MoE(Config(**ck["config"]))
    model.load_state_dict(ck["state"])
    model.eval()
    return model


def write_metadata(w: gguf.GGUFWriter, cfg: Config, tok: dict, qtype: str, description: str):
    w.add_name("diskformer-demo-qwen35moe")
    w.add_type("model")
    w.add_description(description)
    w.add_file_type({"q8_0": 7, "f32": 0}[qtype])  # LLAMA_FTYPE_MOSTLY_Q8_0 = 7, ALL_F32 = 0
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_block_count(cfg.layers)
    w.add_context_length(cfg.ctx)
    w.add_embedding_length(cfg.hidden)
    w.add_head_count(cfg.heads)
    w.add_head_count_kv(cfg.kv_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_layer_norm_rms_eps(cfg.eps)
    w.add_expert_count(cfg.experts)
    w.add_expert_used_count(cfg.top_k)
    w.add_expert_feed_forward_length(cfg.expert_ffn)
    w.add_expert_shared_feed_forward_length(cfg.shared_ffn)
    w.add_rope_dimension_count(cfg.rope_dims)
    w.add_rope_dimension_sections(cfg.rope_sections())
    w.add_ssm_conv_kernel(cfg.conv_kernel)
    w.add_ssm_state_size(cfg.lin_head_dim)
    w.add_ssm_group_count(cfg.lin_k_heads)
    w.add_ssm_time_step_rank(cfg.lin_v_heads)
    w.add_ssm_inner_size(cfg.lin_head_dim * cfg.lin_v_heads)
    w.add_full_attention_interval(cfg.full_attn_interval)
    w.add_array(f"{ARCH}.attention.recurrent_layers", [cfg.is_recurrent(i) for i in range(cfg.layers)])
    sp = tok["special_ids"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["token_types"])
    w.add_token_merges(tok["merges"])
    w.add_eos_token_id(sp["<|im_end|>"])
    w.add_pad_token_id(sp["<|endoftext|>"])
    w.add_bos_token_id(sp["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)


def export(model: Qwen35MoE, tok: dict, out: Path, qtype: str, description: str) -> dict:
    """Write the GGUF; returns {tensor name: type name}."""
    cfg = model.cfg
    if len(tok["tokens"]) != cfg.n_vocab:
        raise ValueError(f"tokenizer has {len(tok['tokens'])} tokens, the model {cfg.n_vocab}")
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), ARCH)
    write_metadata(w, cfg, tok, qtype, description)
    types = {}
    for name, array in model.gguf_tensors().items():
        t = tensor_type(name, array, qtype)
        data = gguf.quants.quantize(np.ascontiguousarray(array, dtype=np.float32), t)
        w.add_tensor(name, data, raw_dtype=t)  # quantised data: its byte shape gives the element shape
        types[name] = t.name
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return types


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json from bpe_train.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--qtype", choices=["q8_0", "f32"], default="q8_0")
    ap.add_argument("--description", default="Demo model trained by diskformer's tools/demo_model on docstrings and "
                    "documentation of the Python standard library (PSF-2.0 licensed text).")
    args = ap.parse_args(argv)
    model = load_model(Path(args.checkpoint))
    tok = json.loads(Path(args.tokenizer).read_text(encoding="utf-8"))
    types = export(model, tok, Path(args.out), args.qtype, args.description)
    size = Path(args.out).stat().st_size
    print(f"wrote {args.out}: {len(types)} tensors ({sum(t == 'Q8_0' for t in types.values())} Q8_0), "
          f"{size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
