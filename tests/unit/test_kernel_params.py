"""Kernel parameters packed by field name from each kernel's WGSL `struct Params` (CPython, no GPU)."""
import re
import struct

import pytest

from py_engine.gpu.params import ParamsError, ParamsLayout
from py_engine.gpu.shader_loader import default_shader_dir, shader_index

_LITERAL_INCLUDE = re.compile(r'^[ \t]*#include[ \t]+"([^"{}]+)"', re.M)


def test_pack_by_field_name():
    layout = ParamsLayout.parse("// x\nstruct Params { n: u32, eps: f32,  // why\n  off: i32, pad0: u32 }\n", "k.wgsl")
    assert layout.names == ("n", "eps", "off", "pad0") and layout.size == 16
    assert layout.pack({"off": -2, "eps": 0.5, "n": 7}) == struct.pack("<IfiI", 7, 0.5, -2, 0)
    with pytest.raises(ParamsError, match=r"k.wgsl: .*missing eps.*declares n, eps, off, pad0"):
        layout.pack({"n": 1, "off": 0})
    with pytest.raises(ParamsError, match="unknown rows"):
        layout.pack({"n": 1, "eps": 0.0, "off": 0, "rows": 3})
    with pytest.raises(ParamsError, match="does not fit its type"):
        layout.pack({"n": -1, "eps": 0.0, "off": 0})
    with pytest.raises(ParamsError, match="not a u32, i32 or f32 scalar"):
        ParamsLayout.parse("struct Params { v: vec4<f32> }")
    with pytest.raises(ParamsError, match="expected one `struct Params`, found 0"):
        ParamsLayout.parse("struct Other { n: u32 }")


def _declares_params(text: str) -> bool:
    return re.search(r"\bstruct\s+Params\b", text) is not None


def test_every_repo_params_struct_parses():
    """Every `struct Params` in the shaders tree is a list of 4-byte scalars the launchers can pack by name, and every
    kernel that binds a uniform `p` declares one (in itself or in a fragment it includes by a fixed name)."""
    index = shader_index(default_shader_dir())
    texts = {name: path.read_text() for name, path in index.items()}
    declared = 0
    for name, text in texts.items():
        if _declares_params(text):
            layout = ParamsLayout.parse(text, name)
            assert layout.size % 4 == 0
            declared += 1
    assert declared >= 40
    for name, text in texts.items():
        if "@compute" not in text or not re.search(r"var<uniform>\s+p\s*:\s*Params", text):
            continue
        seen, todo = set(), [name]
        while todo:
            cur = todo.pop()
            if cur not in seen:
                seen.add(cur)
                todo.extend(_LITERAL_INCLUDE.findall(texts[cur]))
        owners = [n for n in seen if _declares_params(texts[n])]
        assert len(owners) == 1, f"{name}: its struct Params comes from {owners or 'nowhere'}"
