"""The GPU set-up of a Load, told as it goes: the longest wait of a Load on a software adapter (tens of seconds for a
small model) is compiling the compute pipelines, then uploading the weights and recording the token's dispatches.

`ReportingPipelines` reports every pipeline it compiles and records which ones a model used; the page keeps that
list per model and sends it with the next Load (`pipeline_specs`), which then compiles them all at once through
createComputePipelineAsync and can say "n of N". Events: {stage: 'gpu', step: 'device' | 'pipelines' | 'weights' |
'record', message, done, total_steps} (total_steps None while unknown); 'weights' carries bytes / total as they
reach the GPU (`WeightsReporter`, at most ~10 a second).
"""
MAX_SPECS = 512  # more than any model here uses: a longer list is not one this page sent


def spec_key(name: str, consts: dict) -> tuple:
    return name, tuple(sorted(consts.items()))


class ReportingPipelines:
    """The session's Pipelines (py_engine/gpu/pipelines.py), passed everywhere in its place: every pipeline compiled
    during a Load is counted and reported, and the ones the Load asked for are recorded. Anything else is the
    wrapped object's."""

    def __init__(self, pipelines):
        self.inner = pipelines
        self.built = set()  # keys of the pipelines the wrapped cache holds
        self.on_compiled = None  # callable(count) while a Load reports
        self.compiled = 0  # pipelines compiled one by one (synchronously) during the current Load
        self.used = {}  # key -> None: every pipeline the current Load asked for, in order

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def begin(self, on_compiled):
        self.on_compiled, self.compiled, self.used = on_compiled, 0, {}

    def end(self):
        self.on_compiled = None

    def get(self, name: str, **consts):
        key = spec_key(name, consts)
        pipe = self.inner.get(name, **consts)
        if key not in self.built:
            self.built.add(key)
            if self.on_compiled is not None:
                self.compiled += 1
                self.on_compiled(self.compiled)
        if self.on_compiled is not None:
            self.used.setdefault(key, None)
        return pipe

    async def prepare(self, specs, on_ready=None):
        n = await self.inner.prepare(specs, on_ready)
        self.built.update(spec_key(name, consts) for name, consts in specs)
        return n

    def specs(self) -> list:
        """What the current Load used, as the page stores it: [[name, {const: value}], ...]."""
        return [[name, dict(consts)] for name, consts in self.used]


def clean_specs(specs) -> list:
    """The page's stored list as (name, consts) pairs; anything malformed is dropped (the Load then compiles as it
    goes, as on a first visit)."""
    out = []
    if not isinstance(specs, (list, tuple)) or len(specs) > MAX_SPECS:
        return out
    for spec in specs:
        if (isinstance(spec, (list, tuple)) and len(spec) == 2 and isinstance(spec[0], str)
                and isinstance(spec[1], dict)
                and all(isinstance(k, str) and isinstance(v, (int, float, bool, str)) for k, v in spec[1].items())):
            consts = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in spec[1].items()}
            out.append((spec[0], consts))
    return out


async def set_up_pipelines(pipelines, specs, progress) -> int:
    """Compile the pipelines a previous Load of this model used, in parallel; 0 when there was no list or the
    browser refused one (the Load then compiles them one by one)."""
    specs = clean_specs(specs)
    if not specs or not hasattr(pipelines, "prepare"):
        return 0

    def ready(done, total):
        progress({"stage": "gpu", "step": "pipelines", "message": f"compiling GPU kernels {done}/{total}",
                  "done": done, "total_steps": total})

    try:
        return await pipelines.prepare(specs, ready)
    except Exception:  # a shader renamed since the list was stored: compile as on a first visit
        return 0


def compiling_reporter(progress):
    def on_compiled(count):
        progress({"stage": "gpu", "step": "pipelines", "message": f"compiling GPU kernels: {count} so far",
                  "done": count, "total_steps": None})
    return on_compiled


class WeightsReporter:
    """The decoder's upload_progress (py_engine/engine/upload_meter.py): each (done, total) becomes the page's
    "uploading weights" step with bytes / total."""

    def __init__(self, progress):
        self.progress = progress

    def __call__(self, done, total):
        self.progress({"stage": "gpu", "step": "weights", "message": "uploading weights", "bytes": done,
                       "total": total})
        if done >= total:  # the next wait (pipelines compiled as the token is recorded) is told by compiling_reporter
            self.progress({"stage": "gpu", "step": "record", "message": "recording the token's GPU commands"})
