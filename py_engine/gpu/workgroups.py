"""Lanes per workgroup of the products that take more than 64: where every workgroup first stages work over all
of its input, larger workgroups share that staging over more rows. Pure arithmetic (no WebGPU), so CPython
tests import it."""

# Lanes per workgroup of a matvec.wgsl product whose staging is a gated input's (x_norm_gated / x_norm_sgate: a
# per-head norm or sigmoid over all of x that every workgroup takes before its rows): 256 lanes share that work
# over 4x the rows of 64. On an H100 the DeltaNet's ssm_out took 92.7 -> 63.7 µs a token, the attention's output
# product and the recurrence together 90.6 -> 80.7 (docs/results/2026-12-06-h100-wide-workgroups.json). Other products
# keep
# 64: the fused RMSNorm's arithmetic (rms_scale64.wgsl) is written for 64 lanes.
GATED_INPUT_WG = 256


def matvec_workgroup(gated_input: bool) -> int:
    """matvec.wgsl's workgroup size for a product."""
    return GATED_INPUT_WG if gated_input else 64


# Lanes per workgroup of moe_down_combine, at most: each workgroup stages (and quantises) all k + 1 experts'
# activations for its rows, so 256 lanes (16 rows at 16 lanes a row) share one staging that 64 lanes did for 4. On an
# H100 the 8 dispatches took 96.0 -> 80.2 µs a token (128 lanes: 84.9;
# docs/results/2026-12-06-h100-wide-workgroups.json).
MOE_DOWN_WG = 256
WORKGROUP_STORAGE = 16384  # bytes of workgroup memory every WebGPU device offers (maxComputeWorkgroupStorageSize)


def moe_down_workgroup(n_e: int, nb: int, rows_per: int = 1) -> int:
    """moe_down_combine's lanes per workgroup: MOE_DOWN_WG, halved (not below 64) until its partials (4 bytes per
    lane, expert and row) and the staged blocks (36 bytes each: xq_staged.wgsl's codes and scale) fit the workgroup
    memory."""
    wg = MOE_DOWN_WG
    while wg > 64 and 4 * wg * n_e * rows_per + 36 * n_e * nb > WORKGROUP_STORAGE:
        wg //= 2
    return wg


# Lanes of argmax_final, the one workgroup that reduces the output head's (value, index) partials (~15.5k on a
# 248k-token vocabulary): in 256 lanes each took ~61 in eight steps of dependent memory round trips (12.1 µs a token
# on an H100, docs/results/2026-12-07-h100-argmax-1024.json); in 1024, ~15 in two, and the tree one level more.
ARGMAX_WG = 1024
ARGMAX_MIN_WG = 256  # every WebGPU device offers 256 invocations per workgroup


def argmax_workgroup(limits: dict, requested: "int | None" = None) -> int:
    """argmax_final's lanes: `requested` where given (a power of 4: argmax_reduce.wgsl's tree takes two levels a
    step), else ARGMAX_WG where the adapter's limits allow a workgroup that wide, else ARGMAX_MIN_WG."""
    if requested is not None:
        if requested < 4 or requested & (requested - 1) or requested.bit_length() % 2 == 0:
            raise ValueError(f"argmax_final in {requested} lanes: needs a power of 4 (4, 16, 64, 256, 1024)")
        return requested
    cap = min(int(limits.get("maxComputeInvocationsPerWorkgroup", ARGMAX_MIN_WG)),
              int(limits.get("maxComputeWorkgroupSizeX", ARGMAX_MIN_WG)))
    return ARGMAX_WG if cap >= ARGMAX_WG else ARGMAX_MIN_WG
