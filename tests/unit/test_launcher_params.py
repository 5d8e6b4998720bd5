"""Every launcher in py_engine/gpu passes its kernel exactly the fields of the kernel's WGSL `struct Params` (CPython,
no GPU): the launchers record into a device that only notes what it is given, with the real shader loader and
Params packing, so a field missing, unknown or of the wrong type fails here before any lavapipe run. The numbers
the kernels compute are checked by the *_node.py tests."""
import importlib
import sys
import types
from types import SimpleNamespace

import pytest


class _JsArray(list):
    @classmethod
    def new(cls, *items):
        return cls(items)

    @classmethod
    def of(cls, *items):
        return cls(items)

    def push(self, item):
        self.append(item)

    def concat(self, other):
        return _JsArray(self + other)


class _JsObject(SimpleNamespace):
    @classmethod
    def new(cls):
        return cls()

    @staticmethod
    def fromEntries(entries):
        return dict(entries)


class _Device:
    """Notes the bind groups it is asked for; buffers are plain records of their size."""

    def __init__(self):
        self.bind_groups = []

    def createBuffer(self, desc):
        return SimpleNamespace(size=desc.size, label=desc.label, destroy=lambda: None)

    def createShaderModule(self, desc):
        return desc

    def createComputePipeline(self, desc):
        return SimpleNamespace(label=desc["label"], getBindGroupLayout=lambda group: None)

    def createBindGroup(self, desc):
        self.bind_groups.append(desc)
        return desc


@pytest.fixture
def gpu_modules(monkeypatch):
    """py_engine.gpu's launcher modules imported against a stand-in `js` / `pyodide` (CPython has neither), and
    forgotten again afterwards."""
    js = types.ModuleType("js")
    js.Array, js.Object = _JsArray, _JsObject
    pyodide = types.ModuleType("pyodide")
    ffi, code = types.ModuleType("pyodide.ffi"), types.ModuleType("pyodide.code")
    ffi.to_js = lambda value, **kw: value
    code.run_js = lambda source: None
    pyodide.ffi, pyodide.code = ffi, code
    for name, mod in (("js", js), ("pyodide", pyodide), ("pyodide.ffi", ffi), ("pyodide.code", code)):
        monkeypatch.setitem(sys.modules, name, mod)
    before = set(sys.modules)
    names = ("kernels", "chunk_kernels", "fused_kernels", "qwen35_kernels", "pipelines", "commands")
    mods = SimpleNamespace(**{n: importlib.import_module(f"py_engine.gpu.{n}") for n in names})
    yield mods
    for name in set(sys.modules) - before:
        if name.startswith("py_engine."):
            del sys.modules[name]


def _setup(mods):
    gpu = SimpleNamespace(device=_Device(), queue=SimpleNamespace(writeBuffer=lambda *a: None), cpu_adapter=False,
                          max_binding=1 << 27,
                          limits={"maxBufferSize": 1 << 30, "maxComputeWorkgroupsPerDimension": 65535,
                                  "maxStorageBuffersPerShaderStage": 10, "maxComputeInvocationsPerWorkgroup": 1024,
                                  "maxComputeWorkgroupSizeX": 1024})
    pipes = mods.pipelines.Pipelines(gpu)
    kern = mods.kernels.Kernels(gpu, pipes, SimpleNamespace(size=16), advance_step=True)
    return gpu, pipes, kern


def _buf(size=1 << 16):
    return SimpleNamespace(size=size)


def _matrix(mods, fmt, rows, cols, name="w"):
    bufs = {3: _buf(), 4: _buf()} if fmt == "q8" else {3: _buf()}
    return mods.kernels.GpuMatrix(name, fmt, rows, cols, [(0, rows, bufs)])


def _every_dispatch_has_params(gpu):
    """Each bind group of a kernel that declares Params binds its uniform at 0."""
    assert gpu.device.bind_groups
    for bg in gpu.device.bind_groups:
        label = bg["label"]
        assert any(e["binding"] == 0 for e in bg["entries"]), f"{label}: no Params uniform bound"


def test_decode_launchers(gpu_modules):
    m = gpu_modules
    gpu, _, kern = _setup(m)
    dl = m.commands.DispatchList()
    K, ff, b = m.kernels, m.fused_kernels, _buf
    for fmt in ("q8", "f32"):
        w = _matrix(m, fmt, 96, 128)
        kern.matvec(dl, w, b(), b(), accumulate=True)
        kern.matvec(dl, w, b(), b(), prep=K.NormedInput(b(), 1e-6, xn_out=b()), argmax_out=b())
        kern.matvec(dl, w, b(), b(), prep=K.InputGate("sgate", b(), 32, 64, 32))
        kern.matvec(dl, w, b(), b(), prep=K.InputGate("gated", b(), 0, 32, 32, norm_w=b(), eps=1e-6))
        kern.matvec(dl, w, b(), b(), prep=K.InputGate("pregated", b(), 0, 4, 32, eps=1e-6))
        kern.moe_matvec(dl, _matrix(m, fmt, 4 * 96, 128), 96, 2, b(), b(), K.MoeRoute(b(), b(), 0))
    w = _matrix(m, "q8", 96, 128)
    kern.matvec(dl, w, b(), b(), prep=K.NormedInput(b(), 1e-6, xn_out=b(), xq_out=b()))
    kern.matvec(dl, w, b(), b(), prep=K.Q8_INPUT)
    kern.rmsnorm(dl, b(), b(), b(), 128, 1e-6)
    kern.rmsnorm(dl, b(), b(), b(), 128, 1e-6, xq=b())
    kern.embed(dl, _matrix(m, "q8", 50, 128), b())
    rope = K.DecodeAttentionShape(4, 2, 64, 0.125, n_rot=32, eps=1e-6, rope_base=1e4, q_stride=128, k_base=512,
                                  v_base=640)
    kern.qk_rope_append(dl, b(), b(), b(), b(), b(), b(), rope)
    kern.attention(dl, b(), b(1 << 20), b(1 << 20), b(), K.DecodeAttentionShape(4, 2, 64, 0.125), n_ctx=512)
    kern.attention_appending(dl, b(), None, None, b(), b(), b(),
                             K.DecodeAttentionShape(4, 2, 64, 0.125, n_rot=64, eps=1e-6, rope_base=1e4,
                                                    q_stride=64, k_base=256, v_base=384), n_ctx=64)
    kern.silu_mul(dl, b(), b(), b(), 96)
    kern.add(dl, b(), b(), 96)
    kern.moe_combine(dl, b(), b(), b(), 96, 2)
    kern.router_topk(dl, b(), b(), b(), 16, 4)
    gate, up, down = (_matrix(m, "q8", 4 * 96, 128, n) for n in ("gate", "up", "down"))
    ff.moe_gate_up(kern, dl, gate, up, ff.DecodeMoeShape(4, 2, 96), b(), b(), K.MoeRoute(b(), b(), 0))
    ff.moe_route_gate_up(kern, dl, gate, up, ff.DecodeMoeShape(4, 2, 96, shared_slot=3), b(), b(),
                         K.MoeRoute(b(), b(), 0))
    ff.ffn_gate_up(kern, dl, _matrix(m, "q8", 96, 128), _matrix(m, "q8", 96, 128), b(), b())
    ff.shexp_down_combine(kern, dl, _matrix(m, "q8", 128, 96), b(), ff.RoutedOutputs(b(), b(), 2), b(), b(), b())
    ff.moe_down_combine(kern, dl, _matrix(m, "q8", 4 * 128, 96), 128, 2, b(), K.MoeRoute(b(), b(), 0, 16, 32), b(),
                        shared=(3, 4))
    q = m.qwen35_kernels
    q.gdn_conv_recurrent(kern, dl, b(), q.GdnWeights(b(), b(), b()), b(), b(), b(),
                         q.GdnShape(2, 4, 64, 32, 1e-6, 4, x_base=8))
    q.gdn_conv_recurrent(kern, dl, b(), q.GdnWeights(b(), b(), b(), norm=b()), b(), b(), b(),
                         q.GdnShape(2, 4, 64, 32, 1e-6, 4, x_base=8, z_base=512), sq_parts=b())
    q.gdn_gated_norm(kern, dl, b(), b(), b(), b(), q.GdnShape(4, 4, 32, 32, 1e-6, 4))
    q.attn_q_split(kern, dl, b(), b(), 4, 64)
    q.attn_output_gate(kern, dl, b(), b(), 4, 64)
    q.shared_expert_gate(kern, dl, b(), b(), b(), b(), 128)
    assert dl.count == len(gpu.device.bind_groups) > 30
    _every_dispatch_has_params(gpu)


def test_chunk_launchers(gpu_modules):
    m = gpu_modules
    gpu, _, kern = _setup(m)
    dl = m.commands.DispatchList()
    b, T = _buf, 16
    ck = m.chunk_kernels.ChunkKernels(kern, b(), T)
    shapes = importlib.import_module("py_engine.gpu.chunk_shapes")
    w = _matrix(m, "q8", 96, 128)
    ck.gemm(dl, w, b(), b(), shapes.GemmRows(128, 96))
    ck.gemm(dl, w, b(), b(), shapes.GemmRows(128, 96), k_slices=2, accumulate=True)
    ck.gemm(dl, w, b(), b(), shapes.GemmRows(128, 96), xq=b())
    ck.gemm_quantised(dl, w, b(), b(), b(), 96)
    ck.last_row(dl, b(), b(), 128)
    pool = _matrix(m, "q8", 8 * 96, 128)
    few, many = (shapes.ExpertRouting(k, 8, b(), b(), 0, b()) for k in (2, 8))
    ck.expert_gemm(dl, pool, b(), b(), few, shapes.ExpertGemmShape(96, 128, 2))  # few picks per expert
    ck.expert_gemm(dl, pool, b(), b(), many, shapes.ExpertGemmShape(96, 128, 8), x_q8=True)
    kern.q8_act = False
    ck.expert_gemm(dl, _matrix(m, "f32", 8 * 96, 128), b(), b(), many, shapes.ExpertGemmShape(96, 128, 8))  # tiles
    kern.q8_act = True
    gate, up = _matrix(m, "q8", 8 * 64, 128, "gate"), _matrix(m, "q8", 8 * 64, 128, "up")
    ck.expert_gate_up(dl, gate, up, b(), b(), few, shapes.ExpertGemmShape(64, 128, 2))
    ck.embed(dl, _matrix(m, "q8", 50, 128), b(), b())
    ck.rmsnorm(dl, b(), b(), b(), 128, 1e-6, xq=b())
    ck.qk_norm_rope(dl, b(), b(), 4, 64, 32, 1e-6, 1e4, 512)
    ck.kv_append(dl, b(), b(), b(), 128, 256, 384, 512)
    ck.attention(dl, b(), b(), b(), b(), shapes.AttentionShape(4, 2, 64, 0.125, 256, 256))
    ck.router_topk(dl, b(), b(), b(), 16, 4)
    ck.moe_group(dl, b(), b(), 4, 16)
    ck.moe_combine(dl, b(), b(), b(), 128, 4)
    ck.gdn_conv(dl, b(), b(), b(), b(), 384, 4)
    ck.gdn_recurrent(dl, b(), b(), (b(), b()), b(), b(), b(), shapes.DeltaNetShape(2, 4, 64, 32, 1e-6))
    assert dl.count == len(gpu.device.bind_groups) > 20
    _every_dispatch_has_params(gpu)


def test_a_wrong_field_is_refused(gpu_modules):
    m = gpu_modules
    _, _, kern = _setup(m)
    dl = m.commands.DispatchList()
    with pytest.raises(ValueError, match=r"add.wgsl: parameters do not match .*unknown count.*missing n"):
        kern.record(dl, "add.wgsl", {}, {1: _buf(), 2: _buf()}, 1, "add", {"count": 4})


def test_q4_launchers(gpu_modules):
    m = gpu_modules
    gpu, _, kern = _setup(m)
    q4 = importlib.import_module("py_engine.gpu.q4_kernels")
    dl = m.commands.DispatchList()
    b = _buf
    w = m.kernels.GpuMatrix("w", "q4", 96, 128, [(0, 64, {3: b(), 4: b()}), (64, 32, {3: b(), 4: b()})])
    for q8_act in (True, False):
        kern.q8_act = q8_act
        q4.q4_matvec(kern, dl, w, b(), b(), accumulate=True)
        q4.q4_matvec(kern, dl, w, b(), b(), norm=(b(), 1e-6))
    q4.embed_scaled(kern, dl, m.kernels.GpuMatrix("emb", "q6k", 50, 256, [(0, 50, {3: b()})]), b(), 16.0)
    q4.embed_scaled(kern, dl, w, b())
    assert dl.count == len(gpu.device.bind_groups) == 11  # two bands: two dispatches a product
    _every_dispatch_has_params(gpu)
