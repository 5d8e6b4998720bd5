"""Launchers for the weight formats gemma4 adds to the shared kernels: Q4_0 matrices and the Q6_K token table.
Each records its dispatches into a DispatchList through a `Kernels` instance (its pipelines, step uniform and
parameter buffers), like the launchers in kernels.py.

GpuMatrix formats: "q4" bands hold {3: the nibble codes (16 bytes per block), 4: the f16 scales (2 per u32)}, the
store's two planes of a Q4_0 tensor (py_engine.gguf.split_q4_0); "q6k" bands hold {3: the raw 210-byte Q6_K blocks}
(the store keeps Q6_K unsplit), rows of whole 256-value blocks.

A Q4_0 product quantises its input to Q8_0 per 32-block as llama.cpp's CPU backend does for Q4_0 matrices (the
numpy reference's q8_activations emulation rounds Q4_0 inputs the same way), then takes int8 dot products; with
`Kernels.q8_act` False it multiplies f32 activations instead (shaders/matvec/block_dot_q4.wgsl).
"""
from .kernels import F32_STAGED_MAX_COLS, Q8_MAX_COLS, GpuMatrix, matvec_lanes, matvec_rows_per_group
from .workgroups import matvec_workgroup

Q6K_VALUES = 256  # per Q6_K block
EMBED_FORMATS = ("q6k", "q4", "q8", "f32")


def q4_activations(kern, fused_norm: bool, cols: int) -> str:
    """The activation operand of a Q4_0 product (matvec.wgsl's XFMT)."""
    if kern.q8_act:
        return "q8"
    if fused_norm and cols > F32_STAGED_MAX_COLS:
        raise ValueError(f"a norm fused into an f32-activation product of {cols} columns (at most "
                         f"{F32_STAGED_MAX_COLS})")
    return "f32s" if fused_norm else "f32"


def q4_matvec(kern, dl, w: GpuMatrix, x, y, x_base=0, y_base=0, accumulate=False, norm=None, label=""):
    """y[y_base + r] (+)= W[r]·x[x_base ..] for every row r of the Q4_0 matrix W (one dispatch per band), through
    shaders/matvec/matvec.wgsl with WFMT q4. norm=(norm_weight, eps): multiply rmsnorm(x) * norm_weight instead of x,
    the norm fused into each workgroup's staging (x_norm_rms.wgsl)."""
    if w.fmt != "q4":
        raise ValueError(f"{w.name}: q4_matvec multiplies Q4_0 matrices, not {w.fmt!r}")
    if w.cols > Q8_MAX_COLS:
        raise ValueError(f"{w.name}: {w.cols} columns; the engine's Q4_0 kernels handle at most {Q8_MAX_COLS}")
    w.require_whole("q4_matvec")
    act = q4_activations(kern, norm is not None, w.cols)
    nb = w.cols // 32
    wg = matvec_workgroup(False)
    for row0, n, bufs in w.bands:
        lanes = matvec_lanes(n, nb, kern.lane_cap, kern.matvec_min_groups)
        rows = matvec_rows_per_group(n, lanes, kern.matvec_multi_row_groups)
        groups = -(-n // (wg // lanes * rows))
        consts = {"WFMT": "q4", "XFMT": act, "LANES": lanes, "ROWS": rows, "STAGED_BLOCKS": nb,
                  "ACCUMULATE": "true" if accumulate else "false", "NORM": "none" if norm is None else "rms",
                  "ARGMAX": "none", "XN": "f32", "WG": wg}
        params = {"rows": n, "nb": nb, "x_base": x_base, "y_base": y_base + row0, "eps": norm[1] if norm else 0.0,
                  "xn_write": 0, "group": 0, "g_base": 0, "g_stride": 0, "part_base": 0}
        bindings = {1: x, 2: y, **bufs}
        if norm is not None:
            bindings.update({5: norm[0], 6: kern.placeholder()})  # xn_out declared, never written here
        kern.record(dl, "matvec.wgsl", consts, bindings, groups, label or w.name, params)


def embed_scaled(kern, dl, table: GpuMatrix, y, scale=1.0, label="embed"):
    """y[0 .. cols) = row step.token of `table`, dequantised exactly, times `scale` in f32 (one dispatch per band;
    shaders/embed_output/embed.wgsl). gemma4 passes its Q6_K table and sqrt(n_embd)."""
    if table.fmt not in EMBED_FORMATS:
        raise ValueError(f"{table.name}: no embedding lookup of format {table.fmt!r} (only {', '.join(EMBED_FORMATS)})")
    if table.fmt == "q6k" and table.cols % Q6K_VALUES:
        raise ValueError(f"{table.name}: Q6_K rows of {table.cols} values are not whole {Q6K_VALUES}-value blocks")
    table.require_whole("embed_scaled")
    for row0, n, bufs in table.bands:
        kern.record(dl, "embed.wgsl", {"WFMT": table.fmt}, {1: kern.step, 2: y, **bufs},
                    (table.cols + 255) // 256, label, {"n": table.cols, "row_base": row0, "rows": n, "scale": scale})
