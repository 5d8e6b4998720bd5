"""Router look-ahead: guesses of the next layers' experts, computed on the GPU inside the recorded token.

Per MoE layer L (when prefetch is on), just before L's residency check, the token also runs layer L+d's router on
the activations of layer L for d = 1 .. depth: RMSNorm of the residual h (attention of L added, L's experts not yet)
with layer L+d's own pre-MoE norm weights, L+d's `ffn_gate_inp` matvec, then the stock `router_topk`. The guesses
land in a small buffer (one 256-aligned entry per (L, d), since a binding offset must be aligned) that the token's
readback copies along with the routed ids, so they cost no extra sync; a token that stops at L (early stop) or the
CPU that reads L's ids (per-layer routing) hands them to `ExpertStreamer.prefetch`.

Why h normalised with L+d's weights rather than L's normed input `xn`: L+d's router really sees
norm_{L+d}(h + the rest of layer L .. L+d's attention); the residual stream changes little per layer, so the
best cheap stand-in is the same normalisation of the current h. `xn` (normalised with L's weights) differs from
it by the per-channel ratio of the two norm weights, which the router weights are not trained against. The extra
RMSNorm over n_embd values costs next to nothing beside the router matvec (n_expert x n_embd).
"""
import struct

from ..gpu.buffers import storage_buffer
from ..gpu.kernels import NormedInput
from .options import LOOKAHEAD_SOURCES as SOURCES
ALIGN = 256  # the device keeps WebGPU's default minStorageBufferOffsetAlignment (the adapter's may be lower)


class RouterLookAhead:
    def __init__(self, gpu, model, acts, depth: int, source: str = "h"):
        if source not in SOURCES:
            raise ValueError(f"look-ahead source {source!r}: use one of {', '.join(SOURCES)}")
        if depth < 1:
            raise ValueError(f"look-ahead depth must be >= 1, got {depth}")
        cfg = model.cfg
        self.cfg, self.layers, self.acts = cfg, model.layers, acts
        self.depth, self.source = depth, source
        self.n_layer, self.k = cfg.n_layer, cfg.n_expert_used
        self.stride = (4 * self.k + ALIGN - 1) // ALIGN * ALIGN
        n_entries = self.n_layer * depth
        self.ids = storage_buffer(gpu, self.stride * n_entries, "lookahead_ids")
        self.x = storage_buffer(gpu, 4 * cfg.n_embd, "lookahead_x")
        self.logits = storage_buffer(gpu, 4 * cfg.n_expert, "lookahead_logits")
        self.weights = storage_buffer(gpu, 4 * max(4, self.k), "lookahead_w")
        self.nbytes = self.stride * n_entries + 4 * cfg.n_embd + 4 * cfg.n_expert + 4 * max(4, self.k)
        self.recorded = []  # layers whose look-ahead is recorded

    @staticmethod
    def gpu_bytes(cfg, depth) -> int:
        """What the buffers take, known before they exist (for the budget), plus their readback share."""
        stride = (4 * cfg.n_expert_used + ALIGN - 1) // ALIGN * ALIGN
        return (stride * cfg.n_layer * depth + 4 * cfg.n_embd + 4 * cfg.n_expert + 16 * cfg.n_expert_used
                + 4 * cfg.n_expert_used * cfg.n_layer * depth)

    def targets(self, layer):
        return list(range(layer + 1, min(layer + 1 + self.depth, self.n_layer)))

    def entry(self, layer, target) -> int:
        return self.stride * (layer * self.depth + target - layer - 1)

    def record(self, kern, dl, layer):
        """Dispatches of layer `layer`'s guesses (each target layer's router top-k on the current activations)."""
        c = self.cfg
        for t in self.targets(layer):
            w = self.layers[t]
            label = f"lookahead_logits-{layer}>{t}"
            if self.source == "h":  # target layer t's norm, fused into its router product (Kernels.matvec)
                # gemma4's router has a norm weight of its own (router_norm: ffn_gate_inp.scale / sqrt(n_embd))
                norm = w["router_norm"] if "router_norm" in w else w["ffn_norm"]
                kern.matvec(dl, w["ffn_gate_inp"], self.acts["h"], self.logits, label=label,
                            prep=NormedInput(norm, c.rms_eps, xn_out=self.x))
            else:
                kern.matvec(dl, w["ffn_gate_inp"], self.acts["xn"], self.logits, label=label)
            kern.router_topk(dl, self.logits, (self.ids, self.entry(layer, t), 4 * self.k), self.weights,
                             c.n_expert, self.k, renorm=True, label=f"lookahead_topk-{layer}>{t}")
        self.recorded.append(layer)

    def copies(self, layers, at: int):
        """[(buffer, src offset, dst offset, size)] packing every recorded guess densely from byte `at` of a
        readback, in the order `unpack` expects; and the bytes it takes."""
        out, off = [], at
        for layer in layers:
            for t in self.targets(layer):
                out.append((self.ids, self.entry(layer, t), off, 4 * self.k))
                off += 4 * self.k
        return out, off - at

    def unpack(self, raw, layers, at: int, only=None) -> dict:
        """{layer: {target: ids}} from a readback written by `copies(layers, at)` (only the layers in `only`)."""
        out, off = {}, at
        for layer in layers:
            for t in self.targets(layer):
                if only is None or layer in only:
                    out.setdefault(layer, {})[t] = struct.unpack_from(f"<{self.k}I", raw, off)
                off += 4 * self.k
        return out

    def release(self):
        for b in (self.ids, self.x, self.logits, self.weights):
            b.destroy()
