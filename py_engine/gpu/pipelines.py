"""Compute pipelines built from the shaders folder, cached by (shader, constants), and their bind groups."""
from .jsutil import js_object
from .params import ParamsLayout
from .shader_loader import ShaderLoader


class Pipelines:
    def __init__(self, gpu, loader: ShaderLoader | None = None):
        self.gpu = gpu
        self.loader = loader or ShaderLoader()
        self._cache = {}
        self._sources = {}
        self._layouts = {}

    def source(self, name: str, **consts) -> str:
        """The assembled WGSL of shader `name` with `consts` (kept for its pipeline and its Params layout)."""
        key = (name, tuple(sorted(consts.items())))
        code = self._sources.get(key)
        if code is None:
            code = self._sources[key] = self.loader.source(name, consts)
        return code

    def params_layout(self, name: str, **consts) -> ParamsLayout:
        """The `struct Params` of shader `name` with `consts`, parsed once: what its launcher packs by field name."""
        key = (name, tuple(sorted(consts.items())))
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = ParamsLayout.parse(self.source(name, **consts), name)
        return layout

    def _descriptor(self, name: str, consts: dict):
        code = self.source(name, **consts)
        label = name + "".join(f" {k}={v}" for k, v in sorted(consts.items()))
        module = self.gpu.device.createShaderModule(js_object({"code": code, "label": label}))
        return js_object({"label": label, "layout": "auto", "compute": {"module": module, "entryPoint": "main"}})

    def get(self, name: str, **consts):
        """The pipeline of shader `name` (entry point `main`, layout derived from the shader) with `consts`."""
        key = (name, tuple(sorted(consts.items())))
        pipe = self._cache.get(key)
        if pipe is None:
            pipe = self.gpu.device.createComputePipeline(self._descriptor(name, consts))
            self._cache[key] = pipe
        return pipe

    async def prepare(self, specs, on_ready=None):
        """Create the pipelines of `specs` [(name, consts)] not cached yet, all at once through
        createComputePipelineAsync (the browser compiles them in parallel, off the worker), so that get() finds
        them; on_ready(done, total) after each."""
        import asyncio

        todo = {(name, tuple(sorted(consts.items()))) for name, consts in specs} - set(self._cache)
        done = 0

        async def create(key):
            nonlocal done
            pipe = await self.gpu.device.createComputePipelineAsync(self._descriptor(key[0], dict(key[1])))
            self._cache[key] = pipe
            done += 1
            if on_ready is not None:
                on_ready(done, len(todo))

        await asyncio.gather(*(create(key) for key in sorted(todo)))
        return len(todo)

    def bind_group(self, pipeline, buffers: dict, label: str = ""):
        """A bind group for group 0 of `pipeline`: {binding: buffer or (buffer, offset, size)}."""
        entries = []
        for binding, b in sorted(buffers.items()):
            if isinstance(b, tuple):
                buf, offset, size = b
                res = {"buffer": buf, "offset": offset, "size": size}
            else:
                res = {"buffer": b}
            entries.append({"binding": binding, "resource": res})
        return self.gpu.device.createBindGroup(js_object(
            {"label": label, "layout": pipeline.getBindGroupLayout(0), "entries": entries}))


class GpuErrorScope:
    """Collects validation / out-of-memory errors of everything created inside `async with` (one await at exit).

    Used around loading, so a bad shader or binding is reported with WebGPU's own message instead of failing
    silently later.
    """

    def __init__(self, gpu, what: str):
        self.gpu = gpu
        self.what = what

    async def __aenter__(self):
        self.gpu.device.pushErrorScope("out-of-memory")
        self.gpu.device.pushErrorScope("validation")
        return self

    async def __aexit__(self, exc_type, exc, tb):
        validation = await self.gpu.device.popErrorScope()
        oom = await self.gpu.device.popErrorScope()
        if exc_type is not None:
            return False
        for kind, err in (("validation", validation), ("out-of-memory", oom)):
            message = getattr(err, "message", None)  # no error: JS null (a JsNull, not None)
            if message is not None:
                raise RuntimeError(f"WebGPU {kind} error while {self.what}: {message}")
        return False
