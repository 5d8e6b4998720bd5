"""The shader loader (CPython, no GPU): includes, constants, and every repo shader assembled."""
import pytest

def test_shader_loader_includes_and_constants(tmp_path):
    from py_engine.gpu.shader_loader import ShaderError, ShaderLoader

    (tmp_path / "a.wgsl").write_text('#include "b_{{V}}.wgsl"\n#include "b_{{V}}.wgsl"\nconst N = {{N}}u;\n')
    (tmp_path / "b_x.wgsl").write_text("fn b() {}\n")
    (tmp_path / "loop.wgsl").write_text('#include "loop2.wgsl"\n')
    (tmp_path / "loop2.wgsl").write_text('#include "loop.wgsl"\n')
    src = ShaderLoader(tmp_path).source("a.wgsl", {"V": "x", "N": 64})
    assert src.count("fn b() {}") == 1 and "const N = 64u;" in src
    with pytest.raises(ShaderError, match="no value given for"):
        ShaderLoader(tmp_path).source("a.wgsl", {"V": "x"})
    with pytest.raises(ShaderError, match="not found"):
        ShaderLoader(tmp_path).source("a.wgsl", {"V": "y", "N": 1})
    assert ShaderLoader(tmp_path).source("loop.wgsl").count("#include") == 0  # include-once ends cycles


@pytest.mark.parametrize("name,consts", [
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 4, "ROWS": 4, "ACCUMULATE": "false", "NORM": "none", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "f32", "LANES": 4, "ROWS": 1, "ACCUMULATE": "true", "NORM": "none", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 16, "ROWS": 1, "ACCUMULATE": "true", "NORM": "rms", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "f32", "XFMT": "f32s", "LANES": 8, "ROWS": 1, "ACCUMULATE": "false", "NORM": "rms", "ARGMAX": "none", "XN": "q8", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 16, "ROWS": 1, "ACCUMULATE": "true", "NORM": "gated", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 256}),
    ("matvec.wgsl", {"WFMT": "f32", "XFMT": "f32s", "LANES": 8, "ROWS": 1, "ACCUMULATE": "true", "NORM": "sgate", "ARGMAX": "parts", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8pre", "LANES": 16, "ROWS": 4, "ACCUMULATE": "false", "NORM": "none", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("moe_gate_up.wgsl", {"WFMT": "q8", "UFMT": "q8", "XFMT": "q8load", "LANES": 8, "ROUTED": "true", "ROWS": 2,
                          "ROUTE": "topk", "STAGED_BLOCKS": 64}),
    ("rmsnorm_q8.wgsl", {}),
    ("argmax_final.wgsl", {"STEP": "none", "WG": 256}),
    ("argmax_final.wgsl", {"STEP": "next", "WG": 1024}),
    ("qk_rope_append.wgsl", {"KV": "f16"}),
    ("moe_matvec.wgsl", {"WFMT": "f32", "XFMT": "f32", "LANES": 1, "ROWS": 1, "STAGED_BLOCKS": 16}),
    ("moe_matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 4, "ROWS": 4, "STAGED_BLOCKS": 16}),
    ("attention.wgsl", {"KV": "f16", "QIN": "ready", "SPAN": "all", "VSLOTS": 1}),
    ("attention.wgsl", {"KV": "f32", "QIN": "rope", "SPAN": "all", "VSLOTS": 1}),
    ("attention.wgsl", {"KV": "f16", "QIN": "ready", "SPAN": "window", "WINDOW": 16, "RING": 16, "VSLOTS": 2}),
    ("head_norms_rope_append.wgsl", {"KV": "f16"}),
    ("gelu_mul.wgsl", {}),
    ("rmsnorm_add.wgsl", {}),
    ("moe_combine_scaled.wgsl", {}),
    ("softcap.wgsl", {}),
    ("matvec.wgsl", {"WFMT": "q6k", "XFMT": "f32s", "LANES": 4, "ROWS": 4, "ACCUMULATE": "false", "NORM": "rms",
                     "ARGMAX": "parts", "XN": "f32", "STAGED_BLOCKS": 16, "WG": 64}),
    ("moe_matvec.wgsl", {"WFMT": "q4", "XFMT": "q8", "LANES": 4, "ROWS": 1, "STAGED_BLOCKS": 16}),
    ("kv_append_rows.wgsl", {"KV": "f32"}),
    ("embed.wgsl", {"WFMT": "q8"}),
])
def test_repo_shaders_assemble(name, consts):
    from py_engine.gpu.shader_loader import ShaderLoader

    src = ShaderLoader().source(name, consts)
    assert "#include" not in src and "{{" not in src and "fn main(" in src


def test_staging_sized_to_the_pipeline():
    """The workgroup staging of a product's input holds the blocks its pipeline stages, not the widest product's:
    workgroup memory bounds how many workgroups a GPU keeps resident (lab/gpu_probes/wave_sweep.mjs)."""
    from py_engine.gpu.shader_loader import ShaderLoader

    consts = {"WFMT": "q8", "LANES": 16, "ROWS": 4, "ACCUMULATE": "false", "ARGMAX": "none", "XN": "f32", "WG": 64}
    q8 = ShaderLoader().source("matvec.wgsl", {**consts, "XFMT": "q8", "NORM": "rms", "STAGED_BLOCKS": 64})
    assert "const XQ_BLOCKS: u32 = 64u;" in q8 and "array<vec4<u32>, 2u * XQ_BLOCKS>" in q8
    gated = ShaderLoader().source("matvec.wgsl", {**consts, "XFMT": "f32s", "NORM": "gated", "STAGED_BLOCKS": 16})
    assert "const XS_VECS: u32 = 8u * 16u;" in gated and "block_sq: array<f32, 16>" in gated


def test_shaders_found_by_name_in_subfolders(tmp_path):
    """A shader is named by its file name wherever it sits in the tree (or by its path inside the folder); a file
    name used twice is refused."""
    from py_engine.gpu.shader_loader import ShaderError, ShaderLoader

    (tmp_path / "top.wgsl").write_text('#include "leaf.wgsl"\nfn main() {}\n')
    (tmp_path / "group" / "deeper").mkdir(parents=True)
    (tmp_path / "group" / "deeper" / "leaf.wgsl").write_text("fn leaf() {}\n")
    loader = ShaderLoader(tmp_path)
    assert "fn leaf() {}" in loader.source("top.wgsl")
    assert loader.source("group/deeper/leaf.wgsl") == "fn leaf() {}\n"
    with pytest.raises(ShaderError, match="not found"):
        loader.source("group/../top.wgsl")
    (tmp_path / "group" / "top.wgsl").write_text("fn other() {}\n")
    with pytest.raises(ShaderError, match="two shaders are named top.wgsl"):
        ShaderLoader(tmp_path).source("top.wgsl")


def test_repo_shader_tree():
    """Every repo shader has a unique file name, every include resolves, and the engine wheel ships the tree with
    its subfolders."""
    from diskformer.engine_wheel import source_files
    from py_engine.gpu.shader_loader import default_shader_dir, shader_index

    root = default_shader_dir()
    index = shader_index(root)  # raises on a duplicate name
    assert {"matvec.wgsl", "gemm.wgsl", "attention.wgsl", "selftest_saxpy.wgsl"} <= set(index)
    assert index["matvec.wgsl"].parent.name == "matvec"
    names = {name for name, _ in source_files(root.parent)}
    for name, path in index.items():
        assert f"py_engine/shaders/{path.relative_to(root).as_posix()}" in names
