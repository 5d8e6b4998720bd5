"""Launchers for the kernels in shaders/: each records one (or one per row band) dispatch into a DispatchList.

Parameters that never change are baked into a small uniform buffer per dispatch at record time, packed by field
name from the kernel's own `struct Params` (params.py); what changes per token (token id, position) lives in the
shared step uniform (shaders/common/step.wgsl), so recorded lists replay as is. Activations are f32 buffers
addressed by element offsets ("bases").
"""
from dataclasses import dataclass

from .buffers import uniform_buffer
from .commands import split_groups
from .workgroups import argmax_workgroup, matvec_workgroup




class GpuMatrix:
    """A weight matrix on the GPU, split into row bands that each fit one binding.

    fmt "q8": each band holds {3: codes, 4: scales} (Q8_0 planes); fmt "f32": {3: values}. A pool of experts is a
    matrix of n_slots * rows_per_slot rows in one band.

    A row view (`row_view`) is one part of a stacked single-band matrix: it shares the stacked buffers and its row 0
    is row `row_base` of them. Only launchers that add row_base to their weight index may take a view whose
    row_base is not 0 (ChunkKernels.gemm); the others call `require_whole`.
    """

    def __init__(self, name: str, fmt: str, rows: int, cols: int, bands: list, row_base: int = 0):
        if cols % 32:
            raise ValueError(f"{name}: {cols} columns is not a multiple of 32")
        self.name, self.fmt, self.rows, self.cols = name, fmt, rows, cols
        self.bands = bands  # [(first row, rows, {binding: buffer})]
        self.row_base = row_base  # rows of the weight buffers before this matrix's row 0 (a row view)

    def row_view(self, name: str, row0: int, rows: int) -> "GpuMatrix":
        """Rows row0 .. row0 + rows of this single-band matrix as a matrix of its own, sharing the buffers."""
        if len(self.bands) != 1 or not 0 <= row0 <= row0 + rows <= self.rows:
            raise ValueError(f"{self.name}: no row view [{row0}:{row0 + rows}] of {self.rows} rows in "
                             f"{len(self.bands)} bands")
        return GpuMatrix(name, self.fmt, rows, self.cols, [(0, rows, self.bands[0][2])], self.row_base + row0)

    def joined(self, other: "GpuMatrix", name: str):
        """One view over this row view and `other` right after it in the same stacked buffers (their products then
        one GEMM writing both outputs side by side), or None where they are not such neighbours."""
        if (len(self.bands) == len(other.bands) == 1 and self.bands[0][2] is other.bands[0][2]
                and (self.fmt, self.cols) == (other.fmt, other.cols) and other.row_base == self.row_base + self.rows):
            rows = self.rows + other.rows
            return GpuMatrix(name, self.fmt, rows, self.cols, [(0, rows, self.bands[0][2])], self.row_base)
        return None

    def require_whole(self, what: str) -> None:
        """Refuse a row view that does not start at row 0 of its buffers where `what` cannot offset the rows."""
        if self.row_base:
            raise ValueError(f"{self.name}: {what} cannot read a row view (it starts at row {self.row_base} of "
                             f"its buffers)")


@dataclass(frozen=True)
class InputGate:
    """A transform of a product's input fused into the product's staging (Kernels.matvec prep): value e of x,
    in head e // group, is gated by gate[g_base + (e // group) * g_stride + e % group].
    kind "sgate": x · sigmoid(gate) (shaders/x_norm_sgate.wgsl); "gated": per-head RMSNorm with eps, times norm_w
    (group values, shared by the heads) times silu(gate) (shaders/x_norm_gated.wgsl); "pregated": x already holds
    those per-value factors, and `gate` g_stride partial sums of squares per head from which each head's RMSNorm
    scale is taken (shaders/x_norm_pregated.wgsl, after gdn_conv_recurrent(sq_parts=...)). Heads of whole 32-blocks,
    g_base and g_stride multiples of 4 (the kernels read vec4)."""
    kind: str
    gate: object
    g_base: int
    g_stride: int
    group: int
    norm_w: object = None
    eps: float = 0.0


@dataclass(frozen=True)
class NormedInput:
    """A product's input normalised in its staging (Kernels.matvec prep): rmsnorm(x) * weight, with eps. xn_out:
    also receives the normalised input; xq_out: also its Q8_0 copy (both described at Kernels.matvec)."""
    weight: object
    eps: float
    xn_out: object = None
    xq_out: object = None


@dataclass(frozen=True)
class QuantisedInput:
    """A product's input already quantised by rmsnorm(xq=...) (Kernels.matvec prep: Q8_INPUT)."""


Q8_INPUT = QuantisedInput()


def _unpack_prep(w, prep) -> tuple:
    """(norm, xn_out, xq_out, x_gate, x_q8) of a matvec's prep, as Kernels.matvec reads them."""
    if prep is None:
        return None, None, None, None, False
    if isinstance(prep, NormedInput):
        return (prep.weight, prep.eps), prep.xn_out, prep.xq_out, None, False
    if isinstance(prep, InputGate):
        return None, None, None, prep, False
    if isinstance(prep, QuantisedInput):
        return None, None, None, None, True
    raise ValueError(f"{w.name}: unknown input preparation {prep!r} (a NormedInput, an InputGate or Q8_INPUT)")


@dataclass(frozen=True)
class DecodeAttentionShape:
    """One attention layer's shape for the decode launchers (Kernels.qk_rope_append, attention,
    attention_appending), built once from the model's config: heads, head dim and the scores' scale; RMSNorm eps
    of q/k, NeoX RoPE over the first n_rot dims with rope_base; where the q/k/v product puts them (q head h at
    h * q_stride, the k heads from k_base, the v heads from v_base). A ready q (attention) reads no rope field."""
    n_head: int
    n_head_kv: int
    head_dim: int
    scale: float
    n_rot: int = 0
    eps: float = 0.0
    rope_base: float = 0.0
    q_stride: int = 0
    k_base: int = 0
    v_base: int = 0


@dataclass(frozen=True)
class MoeRoute:
    """Where a token's routed experts are found: `picks` holds their ids (a buffer or a (buffer, offset, size)
    view), each the pool slot slot_map[map_base + id]. For the fused kernels picks is the whole route buffer
    (fused_kernels.route_layout): the ids at word ids_base, their weights at w_base."""
    picks: object
    slot_map: object
    map_base: int
    ids_base: int = 0
    w_base: int = 0


def lanes_for(nb: int, cap: int = 16) -> int:
    """Lanes sharing one row in matvec: a power of two <= the row's block count (no idle lanes), at most `cap`."""
    lanes = 1
    while lanes * 2 <= min(nb, cap):
        lanes *= 2
    return lanes


def matvec_lanes(rows: int, nb: int, cap: int, min_groups: int) -> int:
    """Lanes per row of a matvec-layout product over `rows` rows (all experts' rows for a routed one) of nb blocks:
    lanes_for(nb, cap), doubled (up to 64, within nb) while the product would launch fewer than `min_groups`
    workgroups of 64 lanes. A small matrix (a router: 256 rows; a shared expert) otherwise runs on a few dozen
    workgroups whose few lanes each wait on long chains of loads while most of the GPU idles."""
    lanes = lanes_for(nb, cap)
    while lanes * 2 <= min(nb, 64) and rows * lanes // 64 < min_groups:
        lanes *= 2
    return lanes


MATVEC_MIN_GROUPS = 264  # 2 workgroups per SM on a 132-SM GPU; a CPU adapter takes 0 (every workgroup costs there)
MATVEC_MULTI_ROW_GROUPS = 256  # 4 rows per lane group only while that still leaves this many workgroups
Q8_MAX_COLS = 32 * 256  # x_stage_q8.wgsl stages at most 256 blocks of quantised activations per workgroup
F32_STAGED_MAX_COLS = 4 * 512  # x_stage_f32s.wgsl stages at most 512 vec4 of f32 activations per workgroup


def q8_input_words(cols: int) -> int:
    """4-byte words of a Q8_0 product's input quantised ahead (rmsnorm_q8.wgsl): 8 words of codes and one scale per
    32 values, rounded up to whole vec4s."""
    return ((cols // 32) * 9 + 3) // 4 * 4


def matvec_rows_per_group(rows: int, lanes: int, min_groups: int = MATVEC_MULTI_ROW_GROUPS) -> int:
    """Rows one lane group of matvec.wgsl computes: 4 for tall matrices (each workgroup quantises its x once, so
    fewer, fuller workgroups waste less), 1 where fewer workgroups would leave the GPU's cores idle."""
    return 4 if rows * lanes // 64 // 4 >= min_groups else 1


def xfmt(kern, *fmts) -> str:
    """The activation operand of a product with weights of `fmts`: "q8" (x quantised per 32-block as llama.cpp
    does, int8 dot products: shaders/x_stage_q8.wgsl) when a weight is Q8_0 or Q4_0 and the engine quantises them,
    else "f32" (x as is)."""
    return "q8" if kern.q8_act and ("q8" in fmts or "q4" in fmts) else "f32"


def check_q8_cols(w) -> None:
    """Q8_0 products stage the quantised x in workgroup memory: refuse a width the kernels cannot hold."""
    if w.fmt in ("q8", "q4") and w.cols > Q8_MAX_COLS:
        raise ValueError(f"{w.name}: {w.cols} columns; the engine's Q8_0 kernels handle at most {Q8_MAX_COLS}")


ATTENTION_MAX_SPLITS = 32  # workgroups per q head in decode attention: 16 heads x 32 = 512 on a 132-SM GPU
# A CPU adapter (lavapipe, SwiftShader) runs workgroups on a few threads and every launched one costs microseconds,
# idle splits included; the q heads already cover its threads, so it gets one split (measured on lavapipe).
ATTENTION_CPU_SPLITS = 1
ATTENTION_SPLIT_POSITIONS = 64  # a split covers whole 64-position chunks (the kernel's inner chunk)


def attention_splits(n_ctx: int, max_splits: int = ATTENTION_MAX_SPLITS) -> int:
    """Splits of decode attention for a cache of n_ctx rows: one per 64 positions the cache can hold, at most
    max_splits (fixed at record time; at run time splits past the last position write neutral partials)."""
    return max(1, min(max_splits, -(-n_ctx // ATTENTION_SPLIT_POSITIONS)))


class Kernels:
    def __init__(self, gpu, pipelines, step_buffer, lane_cap: int = 16, kv_format: str = "f16",
                 matvec_multi_row_groups: int = MATVEC_MULTI_ROW_GROUPS, q8_act: bool = True,
                 matvec_min_groups: "int | None" = None, advance_step: bool = False,
                 argmax_lanes: "int | None" = None):
        self.gpu = gpu
        self.argmax_lanes = argmax_workgroup(gpu.limits, argmax_lanes)  # argmax_final's; None: by the adapter
        # the output head's argmax also writes the next greedy step's parameters into step_buffer (which then needs
        # STORAGE usage) when the step asks for it (argmax_step_next.wgsl)
        self.advance_step = advance_step
        # workgroups a small product is widened to (matvec_lanes); None: by adapter
        self.matvec_min_groups = matvec_min_groups if matvec_min_groups is not None else (
            0 if gpu.cpu_adapter else MATVEC_MIN_GROUPS)
        self.q8_act = q8_act  # Q8_0 products quantise their input as llama.cpp does (False: f32 activations)
        self.matvec_multi_row_groups = matvec_multi_row_groups
        self.pipes = pipelines
        self.step = step_buffer
        self.lane_cap = lane_cap
        self.kv_format = kv_format
        self._placeholder = None

    def placeholder(self):
        """A small read-only stand-in for a binding a shader declares but a variant does not read."""
        if self._placeholder is None:
            from .buffers import storage_buffer
            self._placeholder = storage_buffer(self.gpu, 256, "placeholder")
        return self._placeholder

    def params(self, shader: str, consts: dict, fields: dict, label: str = ""):
        """A uniform buffer holding `fields` ({name: value}) packed as `shader`'s `struct Params` (with `consts`)
        declares them; a missing or unknown field is an error. Done at record time, never per token."""
        return uniform_buffer(self.gpu, self.pipes.params_layout(shader, **consts).pack(fields), label)

    def record(self, dl, shader: str, consts: dict, bindings: dict, groups, label: str = "", params=None):
        """One dispatch of `shader` (with `consts`) into `dl`: bindings {binding: buffer or (buffer, offset, size)},
        groups a workgroup count (split over x/y where too large) or an (x, y[, z]) tuple. params: the kernel's
        Params fields ({name: value}), packed into a uniform at binding 0."""
        if params is not None:
            bindings = {0: self.params(shader, consts, params, label), **bindings}
        pipe = self.pipes.get(shader, **consts)
        bg = self.pipes.bind_group(pipe, bindings, label)
        gx, gy, gz = (*groups, 1)[:3] if isinstance(groups, tuple) else (*split_groups(groups), 1)
        dl.dispatch(pipe, bg, gx, gy, gz, label)

    def matvec(self, dl, w: GpuMatrix, x, y, x_base=0, y_base=0, accumulate=False, label="", prep=None,
               argmax_out=None):
        """y[y_base + r] (+)= W[r]·x[x_base ..] for every row r of W (one dispatch per band). prep: what is done to
        x in the product's staging, one of a NormedInput (norm, its weight and eps; xn_out, xq_out below), an
        InputGate (x_gate below) or Q8_INPUT (x_q8 below).

        norm (norm_weight, eps): multiply xn = rmsnorm(x[x_base : x_base + cols]) * norm_weight instead of x, as
        rmsnorm() then matvec() would (the same values). The norm is fused into every band's dispatch
        (shaders/x_norm_rms.wgsl): into the Q8_0 staging of a Q8_0-activation product, or, for f32 activations
        (F32 weights such as a router, or the f32-activation mode) up to F32_STAGED_MAX_COLS columns, into an f32
        copy in workgroup memory (x_stage_f32s.wgsl). Wider f32 products fall back to an rmsnorm dispatch into
        xn_out, so xn_out is then required. xn_out: also receives xn at [0, cols) (written by the first band's
        dispatch; must not be x). xq_out: with norm and xn_out, xn is also written quantised per 32-block there
        (q8_input_words(cols) words, rmsnorm_q8.wgsl's layout; shaders/xn_store_q8.wgsl) for a following Q8_0
        product that reads it as is (fused_kernels.moe_route_gate_up(x_q8=True)). x_gate: multiply the gated x of
        an InputGate instead, fused the same way (only where can_gate_input(w)). x_q8: x is the input already
        quantised by rmsnorm(xq=...) (only where takes_q8_input(w); x_base a multiple of 4), read as is by every
        workgroup (shaders/x_stage_q8pre.wgsl).
        argmax_out: also argmax_out[0] = the index (y_base + row) of the largest value written, ties to the lower,
        and argmax_out[1] its f32 bits: every workgroup stores its rows' best as a partial
        (shaders/row_argmax_parts.wgsl) and one more dispatch reduces them (argmax_final), with no pass over y."""
        norm, xn_out, xq_out, x_gate, x_q8 = _unpack_prep(w, prep)
        check_q8_cols(w)
        act = xfmt(self, w.fmt)
        if xq_out is not None and (norm is None or xn_out is None or w.cols % 32):
            raise ValueError(f"{w.name}: a quantised copy of the input (xq_out) needs a fused norm, xn_out and "
                             f"whole 32-blocks")
        if x_q8:
            if norm is not None or x_gate is not None or not self.takes_q8_input(w) or x_base % 4:
                raise ValueError(f"{w.name}: a quantised input only for a plain Q8_0-activation product, at a "
                                 f"vec4 offset")
            act = "q8pre"
        if x_gate is not None:
            if norm is not None or not self.can_gate_input(w):
                raise ValueError(f"{w.name}: no fused {x_gate.kind} input here (check can_gate_input first)")
            if x_gate.group % 32 or x_gate.g_base % 4 or x_gate.g_stride % 4:
                raise ValueError(f"{w.name}: gate of {x_gate.group}-value heads at {x_gate.g_base} + h * "
                                 f"{x_gate.g_stride}: needs whole 32-blocks per head, base and stride multiples of 4")
            if act == "f32":
                act = "f32s"
        if norm is not None and act == "f32" and w.cols <= F32_STAGED_MAX_COLS:
            act = "f32s"  # x staged (normalised) in workgroup memory
        if norm is not None and act == "f32":
            if xn_out is None:
                raise ValueError(f"{w.name}: a norm before an f32-activation product needs xn_out (no fused path)")
            name, dash, layer = (label or w.name).rpartition("-")
            norm_label = f"{name}_norm-{layer}" if dash and layer.isdigit() else (label or w.name) + "_norm"
            self.rmsnorm(dl, x, norm[0], xn_out, w.cols, norm[1], x_base=x_base, label=norm_label, xq=xq_out)
            x, x_base, norm = xn_out, 0, None
        nb = w.cols // 32
        wg = matvec_workgroup(x_gate is not None)
        shapes = []  # per band: lanes, rows per lane group, workgroups
        for row0, n, bufs in w.bands:
            lanes = matvec_lanes(n, nb, self.lane_cap, self.matvec_min_groups)
            rows = matvec_rows_per_group(n, lanes, self.matvec_multi_row_groups)
            shapes.append((lanes, rows, -(-n // (wg // lanes * rows))))
        parts = None
        if argmax_out is not None:
            from .buffers import storage_buffer
            parts = storage_buffer(self.gpu, 8 * sum(s[2] for s in shapes), (label or w.name) + "_argmax_partials")
        part_base = 0
        for band, ((row0, n, bufs), (lanes, rows, groups)) in enumerate(zip(w.bands, shapes)):
            kind = x_gate.kind if x_gate is not None else "none" if norm is None else "rms"
            consts = {"WFMT": w.fmt, "XFMT": act, "LANES": lanes, "ROWS": rows, "STAGED_BLOCKS": nb,
                      "ACCUMULATE": "true" if accumulate else "false", "NORM": kind,
                      "ARGMAX": "none" if parts is None else "parts",
                      "XN": "q8" if xq_out is not None and norm is not None else "f32", "WG": wg}
            write_xn = norm is not None and xn_out is not None and band == 0
            eps = norm[1] if norm else x_gate.eps if x_gate is not None else 0.0
            g = x_gate or InputGate("none", None, 0, 0, 0)
            params = {"rows": n, "nb": nb, "x_base": x_base, "y_base": y_base + row0, "eps": eps,
                      "xn_write": int(write_xn), "group": g.group, "g_base": g.g_base, "g_stride": g.g_stride,
                      "part_base": part_base}
            bindings = {2: y, **bufs, **({7: x} if x_q8 else {1: x})}
            if parts is not None:
                bindings[8] = parts
            part_base += groups
            if norm is not None:
                bindings[5] = norm[0]
                bindings[6] = xn_out if write_xn else self.placeholder()  # declared; written only when asked
                if xq_out is not None:
                    bindings[9] = xq_out  # declared in every band's dispatch, written by the first's
            elif x_gate is not None:
                if x_gate.norm_w is not None:
                    bindings[5] = x_gate.norm_w
                bindings[6] = x_gate.gate
            self.record(dl, "matvec.wgsl", consts, bindings, groups, label or w.name, params)
        if parts is not None:
            self.argmax_final(dl, parts, part_base, argmax_out, label=(label or w.name) + "_argmax")

    def moe_matvec(self, dl, pool: GpuMatrix, rows: int, k: int, x, y, route: "MoeRoute", x_base=0, x_stride=0,
                   label=""):
        """y[k*rows + r] = W_slot(k)[r]·x_k for the k routed experts, their ids in route.picks
        (see shaders/moe_matvec.wgsl)."""
        if len(pool.bands) != 1:
            raise ValueError(f"{pool.name}: an expert pool must be a single buffer per binding")
        check_q8_cols(pool)
        nb = pool.cols // 32
        lanes = matvec_lanes(rows * k, nb, self.lane_cap, self.matvec_min_groups)
        per_row = matvec_rows_per_group(rows * k, lanes, self.matvec_multi_row_groups)
        params = {"rows": rows, "nb": nb, "x_base": x_base, "x_stride": x_stride, "map_base": route.map_base}
        bufs = pool.bands[0][2]
        per_group = 64 // lanes * per_row
        groups = ((rows + per_group - 1) // per_group, k)
        consts = {"WFMT": pool.fmt, "XFMT": xfmt(self, pool.fmt), "LANES": lanes, "ROWS": per_row, "STAGED_BLOCKS": nb}
        self.record(dl, "moe_matvec.wgsl", consts, {1: x, 2: y, **bufs, 5: route.picks, 6: route.slot_map}, groups,
                    label or pool.name, params)

    def can_gate_input(self, w: GpuMatrix) -> bool:
        """Whether matvec can fuse an InputGate into the staging of w's input: a Q8_0-activation product (x is
        staged quantised) or an f32 one narrow enough to stage as f32 (x_stage_f32s.wgsl)."""
        return xfmt(self, w.fmt) == "q8" or w.cols <= F32_STAGED_MAX_COLS

    def takes_q8_input(self, w: GpuMatrix) -> bool:
        """Whether matvec can read w's input quantised ahead (x_q8): w multiplies Q8_0 activations."""
        return xfmt(self, w.fmt) == "q8"

    def rmsnorm(self, dl, x, w, y, n, eps, rows=1, x_base=0, label="rmsnorm", xq=None):
        """y = rmsnorm(x) * w per row of n values. xq: y is also written quantised per 32-block into xq
        (rows · q8_input_words(n) words: the rows' codes, then their scales) for a following matvec(x_q8=True) or
        few-picks expert product (shaders/rmsnorm_q8.wgsl, the same y)."""
        if xq is None:
            self.record(dl, "rmsnorm.wgsl", {}, {1: x, 2: w, 3: y}, (rows, 1), label,
                        {"n": n, "eps": eps, "x_base": x_base, "y_base": 0})
            return
        if n % 32 or x_base % 4:
            raise ValueError(f"{label}: a norm writing a quantised copy takes rows of whole 32-blocks at a vec4 "
                             f"offset (n {n}, x_base {x_base})")
        params = {"n": n, "eps": eps, "x_base": x_base // 4, "y_base": 0, "q_scales": 8 * rows * (n // 32)}
        self.record(dl, "rmsnorm_q8.wgsl", {}, {1: x, 2: w, 3: y, 4: xq}, (rows, 1), label, params)

    def embed(self, dl, table: GpuMatrix, y, label="embed"):
        if hasattr(table, "record_embed"):  # rows on demand through a row cache (engine/embedding_rows.py)
            return table.record_embed(self, dl, y, label)
        for row0, n, bufs in table.bands:
            self.record(dl, "embed.wgsl", {"WFMT": table.fmt}, {1: self.step, 2: y, **bufs},
                        (table.cols + 255) // 256, label, {"n": table.cols, "row_base": row0, "rows": n, "scale": 1.0})

    def qk_rope_append(self, dl, x, q, q_norm, k_norm, k_cache, v_cache, shape: "DecodeAttentionShape",
                       label="qk_rope_append"):
        """One decode token's attention inputs in one dispatch (shaders/qk_rope_append.wgsl): q head h read at
        x[h * q_stride], RMSNorm with q_norm and RoPE into q[h * hd]; k heads at x[k_base ..] likewise with k_norm
        then appended with v (x[v_base ..]) to the caches at row step.pos (the fields of `shape`). Norm weights
        None: no norm."""
        n_head, n_kv_head, hd, n_rot = shape.n_head, shape.n_head_kv, shape.head_dim, shape.n_rot
        if n_rot > hd or n_rot % 2 or hd % 2 or hd > 256:
            raise ValueError(f"bad head dim {hd} / rotary dims {n_rot} (head dim even, <= 256)")
        if (q_norm is None) != (k_norm is None):
            raise ValueError("q and k norms: both or neither")
        use_norm = q_norm is not None
        params = {"hd": hd, "n_rot": n_rot, "eps": shape.eps, "base": shape.rope_base, "n_head": n_head,
                  "n_kv": n_kv_head, "q_stride": shape.q_stride, "k_base": shape.k_base, "v_base": shape.v_base,
                  "use_norm": int(use_norm)}
        binds = {1: self.step, 2: q_norm if use_norm else self.placeholder(),
                 3: k_norm if use_norm else self.placeholder(), 4: x, 5: q, 6: k_cache, 7: v_cache}
        self.record(dl, "qk_rope_append.wgsl", {"KV": self.kv_format}, binds, (n_head + n_kv_head, 1), label, params)

    attention_max_splits = None  # None: by adapter (ATTENTION_MAX_SPLITS; ATTENTION_CPU_SPLITS on a CPU one)

    def attention(self, dl, q, k_cache, v_cache, out, shape: "DecodeAttentionShape", label="attention",
                  n_ctx=None, window=None):
        """out[h*hd ..] = softmax(scale · q_h·K^T) V over the step's n_past cached positions, GQA (flash-decoding:
        shaders/attention.wgsl spreads the positions over attention_splits(n_ctx) workgroups per head,
        shaders/attention_combine.wgsl merges them; one split writes out itself). q is ready (roped): only the
        heads, head dim and scale of `shape` are read. n_ctx, the cache's rows, defaults to what k_cache holds.
        window (positions, ring rows): only the last `positions` are seen, position p at cache row p % ring rows
        (a sliding-window layer; shaders/attention_span_window.wgsl)."""
        n_head, n_kv_head, hd, scale = shape.n_head, shape.n_head_kv, shape.head_dim, shape.scale
        if hd % 2 or hd > 512 or n_head % n_kv_head:
            raise ValueError(f"attention: unsupported head_dim {hd} / heads {n_head}/{n_kv_head}")
        no_rope = {"n_rot": 0, "eps": 0.0, "base": 0.0, "q_stride": 0, "k_base": 0, "v_base": 0, "use_norm": 0}
        fields = {"n_head": n_head, "n_kv_head": n_kv_head, "hd": hd, "scale": scale, **no_rope}
        span = {"SPAN": "all"} if window is None else {"SPAN": "window", "WINDOW": window[0], "RING": window[1]}
        self._attention(dl, "ready", {2: q}, k_cache, v_cache, out, fields, label, n_ctx, span)

    def attention_appending(self, dl, x, q_norm, k_norm, k_cache, v_cache, out, shape: "DecodeAttentionShape",
                            label="attention", n_ctx=None):
        """qk_rope_append then attention in one dispatch (shaders/attention_in_rope.wgsl): the attention's
        workgroups norm and rotate their q heads from the q/k/v product x themselves, and the split holding
        step.pos its KV head's k and v, which it also appends to the caches' row step.pos. The arguments are
        qk_rope_append's and attention's; the outputs (and the cache row) have their bits."""
        n_head, n_kv_head, hd, n_rot = shape.n_head, shape.n_head_kv, shape.head_dim, shape.n_rot
        if n_rot > hd or n_rot % 2 or hd % 2 or hd > 256 or n_head % n_kv_head:
            raise ValueError(f"attention: unsupported head_dim {hd} / rotary dims {n_rot} / heads "
                             f"{n_head}/{n_kv_head}")
        if (q_norm is None) != (k_norm is None):
            raise ValueError("q and k norms: both or neither")
        use_norm = q_norm is not None
        binds = {2: x, 6: q_norm if use_norm else self.placeholder(), 7: k_norm if use_norm else self.placeholder()}
        fields = {"n_head": n_head, "n_kv_head": n_kv_head, "hd": hd, "scale": shape.scale, "n_rot": n_rot,
                  "eps": shape.eps, "base": shape.rope_base, "q_stride": shape.q_stride, "k_base": shape.k_base,
                  "v_base": shape.v_base, "use_norm": int(use_norm)}
        self._attention(dl, "rope", binds, k_cache, v_cache, out, fields, label, n_ctx, {"SPAN": "all"})

    def _attention(self, dl, qin, q_binds, k_cache, v_cache, out, fields, label, n_ctx, span):
        """attention.wgsl with input QIN (its Params' fields but n_split in `fields`), and its combine."""
        n_head, hd = fields["n_head"], fields["hd"]
        if n_ctx is None:
            row_bytes = fields["n_kv_head"] * hd * (2 if self.kv_format == "f16" else 4)
            n_ctx = int(k_cache.size) // row_bytes
        cap = self.attention_max_splits or (
            ATTENTION_CPU_SPLITS if self.gpu.cpu_adapter else ATTENTION_MAX_SPLITS)
        splits = attention_splits(n_ctx, cap)
        pairs = hd // 2
        parts = out if splits == 1 else self._attention_partials(8 * n_head * splits * (1 + pairs))
        # value pairs per lane (attention.wgsl's VSLOTS): 2 for gemma4's 512-value global heads
        self.record(dl, "attention.wgsl", {"KV": self.kv_format, "QIN": qin, "VSLOTS": -(-pairs // 128), **span},
                    {1: self.step, **q_binds, 3: k_cache, 4: v_cache, 5: parts}, (n_head, splits), label,
                    {**fields, "n_split": splits})
        if splits > 1:
            self.record(dl, "attention_combine.wgsl", {}, {1: parts, 2: out}, (n_head, -(-pairs // 128)), label,
                        {"n_head": n_head, "n_split": splits, "pairs": pairs})

    def _attention_partials(self, nbytes: int):
        """One partials buffer shared by every attention dispatch of this Kernels (dispatches run in order, and
        each layer's combine reads them before the next layer's split writes): the largest asked for so far."""
        from .buffers import storage_buffer
        cur = getattr(self, "_attn_parts", None)
        if cur is None or int(cur.size) < nbytes:
            cur = self._attn_parts = storage_buffer(self.gpu, nbytes, "attention_partials")
        return cur

    def silu_mul(self, dl, gate, up, y, n, gate_base=0, up_base=0, y_base=0, label="silu_mul"):
        self.record(dl, "silu_mul.wgsl", {}, {1: gate, 2: up, 3: y}, (n + 255) // 256, label,
                    {"n": n, "gate_base": gate_base, "up_base": up_base, "y_base": y_base})

    def add(self, dl, x, y, n, label="add"):
        self.record(dl, "add.wgsl", {}, {1: x, 2: y}, (n + 255) // 256, label, {"n": n})

    def moe_combine(self, dl, route_w, y, h, n, k, label="moe_combine"):
        self.record(dl, "moe_combine.wgsl", {}, {1: route_w, 2: y, 3: h}, (n + 255) // 256, label, {"n": n, "k": k})

    def router_topk(self, dl, logits, route_ids, route_w, n_exp, k, renorm=True, label="router_topk"):
        if n_exp > 256 or k > 64 or k > n_exp:
            raise ValueError(f"router: {n_exp} experts top-{k} unsupported (<= 256 experts, k <= 64)")
        self.record(dl, "router_topk.wgsl", {}, {1: logits, 2: route_ids, 3: route_w}, (1, 1), label,
                    {"n_exp": n_exp, "k": k, "renorm": int(renorm)})

    def argmax_final(self, dl, parts, m, out, label="argmax"):
        """out[0] = the index of the largest of m (value, index) partials (row_argmax_parts.wgsl's layout, in
        increasing index ranges; ties to the lower index), out[1] its f32 bits."""
        bindings = {1: parts, 2: out}
        if self.advance_step:
            bindings[3] = self.step
        consts = {"STEP": "next" if self.advance_step else "none", "WG": self.argmax_lanes}
        self.record(dl, "argmax_final.wgsl", consts, bindings, (1, 1), label, {"m": m})
