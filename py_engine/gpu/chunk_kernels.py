"""Launchers of the prefill-chunk kernels (shaders/gemm.wgsl, moe_gemm.wgsl, moe_group.wgsl, *_rows.wgsl,
gdn_*_chunk.wgsl): like kernels.py, each records dispatches into a DispatchList through a `Kernels` instance (its
pipelines and parameter buffers). Every dispatch is sized for the recorded chunk of T rows; the chunk uniform
(shaders/chunk.wgsl: rows in use n <= T, position of row 0) is written once per chunk, so one recorded list
serves every chunk, the last short one included.
"""
import re

from .buffers import storage_buffer
from .chunk_shapes import AttentionShape, DeltaNetShape, ExpertGemmShape, ExpertRouting, GemmRows
from .kernels import GpuMatrix, xfmt
from .qwen35_kernels import gdn_lane_consts

GEMM_ROWS = 128  # weight rows per workgroup of shaders/gemm_tile_{f32,q8}.wgsl
GEMM_TOKEN_TILES = (16, 32, 64)  # its token tiles (16 · TILE_TN tokens, TILE_TN = 1, 2, 4 per lane)
ALL_SLOTS = 0xFFFFFFFF  # "slots per buffer" of a pool held in one buffer
# The chunk attention's parts per row (attention_rows.wgsl): 4 x 64 lanes, each part a quarter of the row's
# positions (16 KiB of workgroup memory, WebGPU's default limit); a row's one part left most of a GPU idle.
ATTENTION_SPLITS = 4
FEW_PICKS = 16  # picks per expert (on average) up to which the int8 routed GEMM is shaders/moe_gemm_few.wgsl
FEW_ROWS = 64  # its weight rows per workgroup


def gemm_token_tile(tokens: int) -> int:
    """The narrowest token tile that covers `tokens` rows (the widest when none does): a wide tile reuses each
    staged weight over more tokens, but its lanes multiply zeros for the tokens a short chunk (or an expert with
    few picks) does not have."""
    for tt in GEMM_TOKEN_TILES:
        if tokens <= tt:
            return tt
    return GEMM_TOKEN_TILES[-1]


# A dense GEMM of fewer row x token tiles than 90 % of this (2 workgroups per SM of a 132-SM GPU) is split along K
# toward it (gemm_k_slices) and keeps the token tile that covers the chunk: on the H200 (a 512-token chunk) the
# 2048-row output products took 2.0x less time split in 3 at 64-token tiles than at the 16-token tiles they were
# narrowed to before, the 4096-row z (256 tiles, not split) 1.7x less than at 32-token tiles 
# (docs/results/2026-12-03-h200-prefill-chunk.json).
GEMM_MIN_GROUPS = 264


def gemm_k_slices(tokens: int, rows: int, nb: int, tt: int, cpu_adapter: bool = False) -> int:
    """K slices of a dense GEMM (gemm.wgsl's workgroups z): a product of fewer row x token tiles than 90 % of
    GEMM_MIN_GROUPS is split along K toward GEMM_MIN_GROUPS workgroups (the router's 16 tiles at 512 tokens -> 16
    slices of 4 blocks), each slice summing fewer blocks in turn; gemm_split_sum.wgsl then adds the slices. None on a
    CPU adapter (there every workgroup costs time)."""
    tiles = -(-rows // GEMM_ROWS) * -(-tokens // tt)
    if cpu_adapter or tiles * 10 >= GEMM_MIN_GROUPS * 9 or nb < 2:
        return 1
    kb_per = -(-nb // min(nb, -(-GEMM_MIN_GROUPS // tiles)))
    return -(-nb // kb_per)


def _suffixed(label: str, suffix: str) -> str:
    """('beta-3', '_sum') -> 'beta_sum-3': a GEMM's helper dispatch (its split's slice sums, its input's
    quantisation), profiled as its own kind across the layers."""
    return re.sub(r"(-\d+)?$", lambda m: suffix + m.group(0), label, count=1)


def _sum_label(label: str) -> str:
    return _suffixed(label, "_sum")


def _xq_label(label: str) -> str:
    return _suffixed(label, "_xq")


class ChunkKernels:
    def __init__(self, kern, chunk_uniform, T: int):
        self.kern = kern
        self.chunk = chunk_uniform
        self.T = T
        self.flops = 0  # multiply-adds × 2 of one full chunk's GEMMs (dense + the routed picks), for GFLOP/s
        self._slices = None  # the split GEMMs' partial sums (grown as recorded GEMMs need)
        self._old_slices = []  # smaller ones it replaced, still bound by the dispatches recorded with them

    def record(self, dl, shader, consts, binds, groups, label, params=None):
        """One dispatch of `shader` into `dl` through the Kernels (Kernels.record); params: its Params fields."""
        self.kern.record(dl, shader, consts, binds, groups, label, params)

    def _slice_buffer(self, floats: int):
        if self._slices is None or self._slices.size < 4 * floats:
            if self._slices is not None:
                self._old_slices.append(self._slices)
            self._slices = storage_buffer(self.kern.gpu, 4 * floats, "chunk_gemm_slices")
        return self._slices

    def release(self):
        for b in self._old_slices + ([self._slices] if self._slices else []):
            b.destroy()
        self._slices, self._old_slices = None, []

    @property
    def quantised_rows(self) -> bool:
        """Whether the chunk's norms also write their rows quantised (rmsnorm xq) for the int8 products after them
        (Q8_0-activation mode)."""
        return self.kern.q8_act

    def gemm(self, dl, w: GpuMatrix, x, y, rows: GemmRows, accumulate=False, label="", k_slices=None, xq=None):
        """Y[t·y_stride + y_base + r] (+)= W[r]·X[t·x_stride + x_base ..] for the chunk's rows (one dispatch per
        row band). W may be a row view of a stacked matrix (its row_base goes to the shader). In Q8_0-activation
        mode a Q8_0 W multiplies X quantised per 32-block while staged (shaders/gemm_tile_q8.wgsl: llama.cpp's
        rounding, so raw rows and rows already rounded that way give the same product), or, given xq (the same rows
        as rmsnorm(xq=...) quantised them: X of w.cols per row from 0), X's codes as they are. A product of few
        tiles is split along K (gemm_k_slices; k_slices forces a count): partial sums, then gemm_split_sum.wgsl."""
        nb = w.cols // 32
        cpu = self.kern.gpu.cpu_adapter
        x_stride, y_stride, x_base, y_base = rows.x_stride, rows.y_stride, rows.x_base, rows.y_base
        consts = {"WFMT": w.fmt, "XFMT": xfmt(self.kern, w.fmt), "XIN": "f32"}
        if xq is not None and consts["XFMT"] == "q8":
            if x_base or x_stride != w.cols:
                raise ValueError(f"{label or w.name}: quantised rows are read whole (x_base 0, x_stride {w.cols})")
            x, x_base, consts["XIN"] = xq, 8 * self.T * nb, "q8"  # the scales follow the T rows' codes
        for row0, n, bufs in w.bands:
            tt = gemm_token_tile(self.T)
            ks = min(k_slices, nb) if k_slices else gemm_k_slices(self.T, n, nb, tt, cpu)
            kb_per = -(-nb // ks)
            ks = -(-nb // kb_per)
            groups = ((n + GEMM_ROWS - 1) // GEMM_ROWS, (self.T + tt - 1) // tt, ks)
            if ks == 1:
                params = {"rows": n, "nb": nb, "x_base": x_base, "x_stride": x_stride, "y_base": y_base + row0,
                          "y_stride": y_stride, "accumulate": int(accumulate), "row_base": w.row_base, "kb_per": nb,
                          "slice_stride": 0}
                self.record(dl, "gemm.wgsl", {**consts, "TILE_TN": tt // 16},
                            {1: self.chunk, 2: x, 5: y, **bufs}, groups, label or w.name, params)
                continue
            part = self._slice_buffer(ks * self.T * n)
            params = {"rows": n, "nb": nb, "x_base": x_base, "x_stride": x_stride, "y_base": 0, "y_stride": n,
                      "accumulate": 0, "row_base": w.row_base, "kb_per": kb_per, "slice_stride": self.T * n}
            self.record(dl, "gemm.wgsl", {**consts, "TILE_TN": tt // 16},
                        {1: self.chunk, 2: x, 5: part, **bufs}, groups, label or w.name, params)
            params = {"rows": n, "slices": ks, "y_base": y_base + row0, "y_stride": y_stride,
                      "accumulate": int(accumulate), "slice_stride": self.T * n}
            self.record(dl, "gemm_split_sum.wgsl", {}, {1: self.chunk, 2: part, 3: y},
                        ((n + 255) // 256, self.T), _sum_label(label or w.name), params)
        self.flops += 2 * w.rows * w.cols * self.T

    def gemm_quantised(self, dl, w: GpuMatrix, x, xq, y, y_stride, y_base=0, accumulate=False, label=""):
        """The GEMM of f32 rows that no norm quantised (X of w.cols per row from 0): in the int8 mode X's rows are
        quantised once into xq (quantize_rows_q8.wgsl, the codes the tile's own staging gives) and the tile copies
        them, where each of its row workgroups quantised X again; else the plain gemm. xq holds T rows of w.cols
        (each model's prefill.chunk_row_cols)."""
        if xq is None or xfmt(self.kern, w.fmt) != "q8":
            self.gemm(dl, w, x, y, GemmRows(w.cols, y_stride, y_base=y_base), accumulate=accumulate, label=label)
            return
        nb = w.cols // 32
        params = {"n": w.cols, "x_base": 0, "x_stride": w.cols // 4, "q_scales": 8 * self.T * nb}
        self.record(dl, "quantize_rows_q8.wgsl", {}, {1: self.chunk, 2: x, 3: xq},
                    ((nb + 63) // 64, self.T), _xq_label(label or w.name), params)
        self.gemm(dl, w, x, y, GemmRows(w.cols, y_stride, y_base=y_base), accumulate=accumulate, label=label, xq=xq)

    def last_row(self, dl, x, y, n, label="chunk_last_row"):
        """y[0:n] = the chunk's last row in use of x (rows of n values; chunk_last_row.wgsl)."""
        self.record(dl, "chunk_last_row.wgsl", {}, {1: self.chunk, 2: x, 3: y}, ((n + 255) // 256, 1), label,
                    {"n": n})

    def few_picks(self, pool, k, n_exp) -> bool:
        """Whether the routed GEMM over `pool` takes the few-picks kernels (Q8_0 weights in Q8_0-activation mode, at
        most FEW_PICKS picks per expert on average): each weight block loaded once into registers for all of an
        expert's picks of a pass, where the tile reads each staged weight word for one or two picks only."""
        return (pool.fmt == "q8" and xfmt(self.kern, pool.fmt) == "q8"
                and -(-self.T * k // n_exp) <= FEW_PICKS)

    def fused_gate_up(self, gate, up, down, k, n_exp) -> bool:
        """Whether the routed gate/up/SwiGLU run as one dispatch writing the down product's input quantised
        (moe_gate_up_few.wgsl, then expert_gemm with x_q8): all three pools take the few-picks kernels and the
        device binds its 9 storage buffers (WebGPU's default limit is 8). The FFN width, the down product's K, is
        whole 32-blocks (Q8_0)."""
        return (all(self.few_picks(w, k, n_exp) for w in (gate, up, down))
                and int(self.kern.gpu.limits.get("maxStorageBuffersPerShaderStage") or 8) >= 9)

    @staticmethod
    def _pool_targets(pool, rows, pool_buffers, layout, binds=(3, 4)):
        """(buffer index, slots per buffer, slot's code stride in vec4, its scale stride in f16, codes offset, scales
        offset, bindings) of each dispatch over `pool`: one for a GpuMatrix holding every expert (slot = expert row
        block), one per buffer of a streamed pool (a store PoolPart: its layout places the tensor in each slot)."""
        nb = pool.cols // 32
        blk_v = {"q8": 2, "q4": 1}.get(pool.fmt, 8)  # vec4 words per block (gemm_w_*.wgsl's BLK_V)
        if pool_buffers is None:
            if len(pool.bands) != 1:
                raise ValueError(f"{pool.name}: an expert pool must be a single buffer per binding")
            bufs = pool.bands[0][2]
            return [(0, ALL_SLOTS, rows * nb * blk_v, rows * nb, 0, 0,
                     {binds[0]: bufs[3], **({binds[1]: bufs[4]} if 4 in bufs else {})})]
        stride = layout.slot_stride
        targets = []
        for b, buf in enumerate(pool_buffers):
            bufs = {binds[0]: buf, binds[1]: buf} if pool.fmt in ("q8", "q4") else {binds[0]: buf}  # f32: no scales
            targets.append((b, layout.slots_per_buffer, stride // 16, stride // 2, pool.codes_off // 16,
                            pool.scales_off // 2, bufs))
        return targets

    def expert_gemm(self, dl, pool, x, y, route: ExpertRouting, shape: ExpertGemmShape, x_q8=False, label=""):
        """y[pick·rows + r] = W_expert(pick)[r]·x[(pick / x_div)·x_stride ..] over the grouped picks. `pool`: a
        GpuMatrix holding every expert of the layer (slot = expert row block) or a store PoolPart, the streamed
        pool's buffers and layout in `route` (one dispatch per pool buffer). The token tile fits the picks an
        expert gets on average (T·k / n_exp); the kernel loops over tiles for an expert with more. In Q8_0-activation
        mode, up to FEW_PICKS picks per expert on average take moe_gemm_few.wgsl (each weight block loaded once into
        registers for all of an expert's picks). x_q8: x holds the rows already quantised (expert_gate_up's output
        for the chunk's T·k picks; few-picks kernel only)."""
        if isinstance(pool, GpuMatrix):
            pool.require_whole("expert_gemm")
        rows, k, n_exp = shape.rows, route.k, route.n_exp
        grouped, slot_map, map_base, mask = route.grouped, route.slot_map, route.map_base, route.mask
        nb = pool.cols // 32
        x_base = 0
        # a few picks per expert: weights kept in registers across the picks (moe_gemm_few.wgsl), not staged
        if self.few_picks(pool, k, n_exp):
            shader, consts = "moe_gemm_few.wgsl", {"XIN": "q8" if x_q8 else "f32"}
            groups = ((rows + FEW_ROWS - 1) // FEW_ROWS, n_exp)
            if x_q8:
                x_base = 8 * self.T * k * nb  # the scales follow the T·k rows' codes
        elif x_q8:
            raise ValueError(f"{pool.name}: only the few-picks kernel reads quantised rows")
        else:
            tt = gemm_token_tile(-(-self.T * k // n_exp))
            x_fmt = xfmt(self.kern, pool.fmt)
            shader, consts = "moe_gemm.wgsl", {"WFMT": pool.fmt, "XFMT": x_fmt, "TILE_TN": tt // 16, "XIN": "f32"}
            groups = ((rows + GEMM_ROWS - 1) // GEMM_ROWS, n_exp)
        targets = self._pool_targets(pool, rows, route.pool_buffers, route.layout)
        for b, spb, cstride, sstride, coff, soff, bufs in targets:
            params = {"rows": rows, "nb": nb, "x_base": x_base, "x_stride": shape.x_stride, "x_div": shape.x_div,
                      "map_base": map_base, "n_exp": n_exp, "buf": b, "spb": spb, "code_stride": cstride,
                      "scale_stride": sstride, "codes_off": coff, "scales_off": soff, "codes_off2": 0,
                      "scales_off2": 0, "y_scales": 0}
            self.record(dl, shader, consts, {1: x, 2: y, **bufs, 5: slot_map, 6: grouped, 7: mask}, groups,
                        f"{label or pool.name}@{b}", params)
        self.flops += 2 * rows * pool.cols * k * self.T

    def expert_gate_up(self, dl, gate, up, xq, act_q8, route: ExpertRouting, shape: ExpertGemmShape, label=""):
        """act_q8 = silu(G·x) · (U·x) per pick, quantised to Q8_0 per 32 rows (moe_gate_up_few.wgsl; the
        layout expert_gemm(x_q8=True) reads: the T·k picks' codes, then their scales), x row = pick / x_div of the
        chunk's T rows as rmsnorm(xq=...) quantised them (read whole: shape's x_stride goes unused). Only where
        fused_gate_up."""
        for w in (gate, up):
            if isinstance(w, GpuMatrix):
                w.require_whole("expert_gate_up")
        rows, k, n_exp, x_div = shape.rows, route.k, route.n_exp, shape.x_div
        grouped, slot_map, map_base, mask = route.grouped, route.slot_map, route.map_base, route.mask
        pool_buffers, layout = route.pool_buffers, route.layout
        nb = gate.cols // 32
        y_scales = 8 * self.T * k * (rows // 32)
        g_targets = self._pool_targets(gate, rows, pool_buffers, layout)
        u_targets = self._pool_targets(up, rows, pool_buffers, layout, binds=(8, 9))
        for (b, spb, cstride, sstride, coff, soff, gbufs), (_, _, _, _, ucoff, usoff, ubufs) in zip(g_targets,
                                                                                                  u_targets):
            params = {"rows": rows, "nb": nb, "x_base": 8 * self.T * nb, "x_stride": 0, "x_div": x_div,
                      "map_base": map_base, "n_exp": n_exp, "buf": b, "spb": spb, "code_stride": cstride,
                      "scale_stride": sstride, "codes_off": coff, "scales_off": soff, "codes_off2": ucoff,
                      "scales_off2": usoff, "y_scales": y_scales}
            self.record(dl, "moe_gate_up_few.wgsl", {},
                        {1: xq, 2: act_q8, **gbufs, **ubufs, 5: slot_map, 6: grouped, 7: mask},
                        ((rows + FEW_ROWS - 1) // FEW_ROWS, n_exp), f"{label}@{b}", params)
        self.flops += 2 * 2 * rows * gate.cols * k * self.T

    def embed(self, dl, table: GpuMatrix, ids, y, label="inp_embd", scale=1.0):
        """y's rows = the ids' rows of the table, dequantised, times scale (gemma4's sqrt(n_embd))."""
        if hasattr(table, "record_embed_rows"):  # rows on demand through a row cache (engine/embedding_rows.py)
            if scale != 1.0:  # only untied Q8_0 tables (the Qwen models') come on demand
                raise ValueError("a token table with rows on demand cannot be scaled")
            return table.record_embed_rows(self, dl, ids, y, label)
        table.require_whole("embed_rows")
        for row0, n, bufs in table.bands:
            self.record(dl, "embed_rows.wgsl", {"WFMT": table.fmt}, {1: self.chunk, 2: y, **bufs, 5: ids},
                        ((table.cols + 255) // 256, self.T), label,
                        {"n": table.cols, "row_base": row0, "rows": n, "scale": scale})

    def rmsnorm(self, dl, x, w, y, n, eps, label="rmsnorm", xq=None):
        self.kern.rmsnorm(dl, x, w, y, n, eps, rows=self.T, label=label, xq=xq)

    def qk_norm_rope(self, dl, x, norm_w, n_heads, hd, n_rot, eps, base, row_stride, label="qk_norm_rope"):
        """shaders/qk_norm_rope.wgsl over the chunk's rows: the chunk uniform holds pos0 where Step holds pos."""
        use_norm = norm_w is not None
        params = {"hd": hd, "n_rot": n_rot, "eps": eps, "base": base, "x_base": 0, "use_norm": int(use_norm),
                  "row_stride": row_stride}
        norm = norm_w if use_norm else self.kern.placeholder()
        self.record(dl, "qk_norm_rope.wgsl", {}, {1: self.chunk, 2: norm, 3: x}, (n_heads, self.T), label, params)

    def kv_append(self, dl, src, k_cache, v_cache, n, k_base, v_base, src_stride, label="kv_append"):
        self.record(dl, "kv_append_rows.wgsl", {"KV": self.kern.kv_format},
                    {1: self.chunk, 2: src, 3: k_cache, 4: v_cache}, ((n // 2 + 63) // 64, self.T), label,
                    {"n": n, "k_base": k_base, "v_base": v_base, "src_stride": src_stride})

    def attention(self, dl, q, k_cache, v_cache, out, shape: AttentionShape, label="attention", splits=None,
                  window=None):
        """Causal attention of the chunk's rows (attention_rows.wgsl): the query heads sharing a KV head go up to 8
        per workgroup (each K/V word loaded once for all of them), each row's positions split over `splits` parts
        of 64 lanes merged at the end (default: ATTENTION_SPLITS on a GPU, 1 on a CPU adapter). window (positions,
        ring rows): a sliding window over a ring cache (Kernels.attention's)."""
        n_head, n_kv_head, hd = shape.n_head, shape.n_kv_head, shape.hd
        if hd % 2 or hd > 512 or n_head % n_kv_head:
            raise ValueError(f"attention: unsupported head_dim {hd} / heads {n_head}/{n_kv_head}")
        if splits is None:
            splits = 1 if self.kern.gpu.cpu_adapter else ATTENTION_SPLITS
        group = n_head // n_kv_head
        hg = min(group, 8, 2048 // hd)  # q_sh holds hg · hd / 2 <= 1024 pairs
        params = {"n_head": n_head, "n_kv_head": n_kv_head, "hd": hd, "scale": shape.scale,
                  "q_stride": shape.q_stride, "out_stride": shape.out_stride, "heads_per_wg": hg}
        span = {"SPAN": "all"} if window is None else {"SPAN": "window", "WINDOW": window[0], "RING": window[1]}
        # value pairs per lane: 2 up to head dim 256, 4 for gemma4's 512-value global heads
        pairs_per_lane = max(2, -(-hd // 128))
        self.record(dl, "attention_rows.wgsl", {"KV": self.kern.kv_format, "SPLIT": splits,
                                                "PAIRS_PER_LANE": pairs_per_lane, **span},
                    {1: self.chunk, 2: q, 3: k_cache, 4: v_cache, 5: out},
                    (n_kv_head * -(-group // hg), self.T), label, params)

    def router_topk(self, dl, logits, route_ids, route_w, n_exp, k, label="router_topk"):
        if n_exp > 256 or k > 64 or k > n_exp:
            raise ValueError(f"router: {n_exp} experts top-{k} unsupported (<= 256 experts, k <= 64)")
        self.record(dl, "router_topk.wgsl", {}, {1: logits, 2: route_ids, 3: route_w}, (self.T, 1), label,
                    {"n_exp": n_exp, "k": k, "renorm": 1})

    def moe_group(self, dl, route_ids, grouped, k, n_exp, label="moe_group"):
        self.record(dl, "moe_group.wgsl", {}, {1: self.chunk, 2: route_ids, 3: grouped}, (1, 1), label,
                    {"k": k, "n_exp": n_exp})

    def moe_combine(self, dl, route_w, y, h, n, k, label="moe_combine"):
        self.record(dl, "moe_combine_rows.wgsl", {}, {1: self.chunk, 2: route_w, 3: y, 4: h},
                    ((n + 255) // 256, self.T), label, {"n": n, "k": k})

    def gdn_conv(self, dl, x, conv_w, window, y, n_channels, kernel_size, label="ssm_conv", keep_label="conv_keep"):
        """The conv + SiLU of every (channel, row) at once (gdn_conv_chunk.wgsl), then the chunk's last inputs into
        the ring (gdn_conv_keep.wgsl): two dispatches, since the first reads the ring the second writes."""
        params = {"n": n_channels, "k": kernel_size, "x_stride": n_channels, "y_stride": n_channels}
        groups = (n_channels + 255) // 256
        self.record(dl, "gdn_conv_chunk.wgsl", {}, {1: self.chunk, 2: x, 3: conv_w, 4: window, 5: y},
                    (groups, self.T), label, params)
        self.record(dl, "gdn_conv_keep.wgsl", {}, {1: self.chunk, 2: x, 4: window}, (groups, 1), keep_label, params)

    def gdn_recurrent(self, dl, qkv, gates, decay, state, out, qk_scales, shape: DeltaNetShape,
                      labels=("delta_net", "delta_net_qk")):
        """The chunk's q/k scales and q·k for every row and key head at once (gdn_qk_scales.wgsl, into qk_scales:
        4 values per row and key head), then the recurrence over the rows (gdn_recurrent_cols.wgsl: each value
        column's state in registers, split over 2 lanes). decay: the layer's (ssm_dt bias, ssm_a) weights; labels:
        (the recurrence's, the q/k scales')."""
        dt_bias, ssm_a = decay
        label, scales_label = labels
        n_k_heads, n_v_heads, dk, dv, eps = shape.n_k_heads, shape.n_v_heads, shape.dk, shape.dv, shape.eps
        if dk > 256 or dk % 4:
            raise ValueError(f"delta net: key head size {dk} unsupported (a multiple of 4, at most 256)")
        q_base, k_base = 0, n_k_heads * dk
        v_base = 2 * n_k_heads * dk
        qkv_stride = 2 * n_k_heads * dk + n_v_heads * dv
        params = {"n_k_heads": n_k_heads, "dk": dk, "q_base": q_base, "k_base": k_base, "qkv_stride": qkv_stride,
                  "eps": eps}
        self.record(dl, "gdn_qk_scales.wgsl", gdn_lane_consts(dk), {1: self.chunk, 2: qkv, 3: qk_scales},
                    (n_k_heads, self.T), scales_label, params)
        params = {"n_k_heads": n_k_heads, "n_v_heads": n_v_heads, "dk": dk, "dv": dv, "q_base": q_base,
                  "k_base": k_base, "v_base": v_base, "eps": eps, "qkv_stride": qkv_stride,
                  "gates_stride": 2 * n_v_heads, "out_stride": n_v_heads * dv}
        # lanes per value column: 2 measured fastest on the H200 (lab/gpu_probes/gdn_variants.mjs: 1, 2, 4, 8 lanes
        # 760, 325, 458, 482 µs for 512 rows at the real sizes; the slice layout 562)
        lanes = 2 if dk % 8 == 0 else 1
        self.record(dl, "gdn_recurrent_cols.wgsl", {"DK": dk, "SL": lanes},
                    {1: self.chunk, 2: qkv, 3: gates, 4: dt_bias, 5: ssm_a, 6: state, 7: out, 8: qk_scales},
                    ((dv * lanes + 31) // 32, n_v_heads), label, params)  # 32 / lanes columns per workgroup
