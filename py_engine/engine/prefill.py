"""Chunked batched prefill: the prompt goes through each layer T tokens at a time (tiled GEMMs over the chunk's
rows, batched norm / RoPE / KV append, causal attention over cache + chunk, the DeltaNet conv and recurrence
sequential inside one dispatch, routed experts as a GEMM over each expert's picks).

`Prefill.build(dec, T)` records one chunk's list once (the model's record_chunk, models/<arch>/prefill.py); a chunk
then costs two writeBuffers (the chunk uniform: rows n <= T and position of row 0; the token ids) and the replay.
Only the hidden rows are computed: the prompt's last token still runs through the decoder's per-token `step`, which
yields its logits, so the logits never differ in how they are produced. Recurrent state and the KV cache are the
decoder's own.

Syncs. Every expert resident (a GGUF, or a store with a full pool): none at all — `feed` enqueues the chunks,
like the token-by-token feed. A partial streamed pool: per chunk and MoE layer one readback of the chunk's routed
ids (n·k u32) after the router; the CPU pages in the union of the chunk's experts for that layer (in groups the
pool can hold, each group's products masked to it) and submits the experts with the next layer's mixer and
router: `n_layers` syncs per chunk instead of `n_layers + 1` per token.
"""
import struct

from ..gpu.buffers import COPY_DST, MAP_READ, UNIFORM, create_buffer, storage_buffer, write_buffer
from ..gpu.chunk_kernels import ChunkKernels
from ..gpu.commands import DispatchList, helper
from ..gpu.kernels import q8_input_words
from ..models.blocks import build_output
from ..models.cache import STATE_BUFFERS
# the chunk computes no logits; its GEMMs write each input projection to its own buffer, not the decode's stacked
# mixer inputs (xq stays: in Q8_0-activation mode the chunk's norms write their rows quantised there, and the
# output products' inputs, wider: the model's chunk_row_cols)
SKIP = ("logits", "argmax", "dn_in", "attn_in", "route")


def chunk_buffer_sizes(model, T: int) -> list:
    """(name, 4-byte words) of the chunk's work buffers: T rows of each per-token activation (and, with DeltaNet
    layers, of the q/k scales per key head: gdn_qk_scales.wgsl), the token ids, the grouped picks (counts | offsets |
    picks) and the per-expert mask."""
    c = model.cfg
    per_token = [(name, q8_input_words(model.chunk_row_cols()) if name == "xq" else n)
                 for name, n in model.work_buffers() if not name.startswith(STATE_BUFFERS) and name not in SKIP]
    per_token += model.chunk_work_buffers()
    sizes = [(name, T * n) for name, n in per_token]
    return sizes + [("ids", T), ("grouped", 2 * c.n_expert + T * c.n_expert_used), ("mask", c.n_expert)]


def chunk_bytes(model, T: int) -> int:
    """GPU bytes the prefill adds (its buffers, the chunk uniform, the routed-ids staging), for the budget."""
    if T <= 1:
        return 0
    return 4 * sum(n for _, n in chunk_buffer_sizes(model, T)) + 16 + 4 * T * model.cfg.n_expert_used


class Prefill:
    def __init__(self, dec, T):
        self.dec, self.T = dec, T
        self.bufs = {}
        self.chunks = 0

    @classmethod
    def build(cls, dec, T: int):
        if T < 2:
            raise ValueError(f"prefill chunk of {T} tokens: use 1 for token-by-token prefill (no Prefill)")
        self = cls(dec, T)
        gpu, model = dec.gpu, dec.model
        for name, n in chunk_buffer_sizes(model, T):
            self.bufs[name] = storage_buffer(gpu, 4 * n, f"chunk_{name}")
        write_buffer(gpu, self.bufs["mask"], 0, struct.pack(f"<{model.cfg.n_expert}I", *[1] * model.cfg.n_expert))
        self.chunk_buf = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
        self.ids_staging = create_buffer(gpu, 4 * T * model.cfg.n_expert_used, MAP_READ | COPY_DST, "chunk_ids_rb")
        self.ck = ChunkKernels(dec.kern, self.chunk_buf, T)
        self.dl = DispatchList()
        pool = getattr(dec, "pool", None)
        self.cuts = model.record_chunk(self.ck, self.dl, self.bufs, dec.acts, dec.cache, dec.slot_map, pool)
        # a prompt fed whole (its last token in the chunks too): the last row's hidden state through the output
        # head, where the per-token list would run the last token through every layer again; None for a decoder
        # that steps a prompt's last token (Decoder.whole_prompts)
        self.head = None
        if dec.whole_prompts:
            self.head = DispatchList()
            self.ck.last_row(self.head, self.bufs["h"], dec.acts["h"], model.cfg.n_embd)
            if hasattr(model, "record_output"):  # a head of its own (gemma4's soft-capped one)
                model.record_output(dec.kern, self.head, dec.acts)
            else:
                build_output(dec.kern, self.head, dec.acts, model.output_norm, model.output, model.cfg)
        self.flops_per_token = self.ck.flops // T
        self.nbytes = chunk_bytes(model, T)
        return self

    def _write_chunk(self, tokens, pos0):
        write_buffer(self.dec.gpu, self.chunk_buf, 0, struct.pack("<4I", len(tokens), pos0, 0, 0))
        write_buffer(self.dec.gpu, self.bufs["ids"], 0, struct.pack(f"<{len(tokens)}I", *tokens))

    def feed(self, tokens, pos0: int) -> int:
        """Every expert resident: enqueue the chunks, no readback, no await. Returns the submits made."""
        dev = self.dec.gpu.device
        for s in range(0, len(tokens), self.T):
            part = tokens[s:s + self.T]
            self._write_chunk(part, pos0 + s)
            helper().replay(dev, self.dl.ops)
            self.chunks += 1
        return (len(tokens) + self.T - 1) // self.T

    async def run_streamed(self, tokens, pos0: int, stats: dict) -> None:
        """A partial pool: per chunk and MoE layer read the routed ids back, page in the union of the chunk's experts
        for the layer, then run its expert products (see the module docstring)."""
        dec = self.dec
        h, dev = helper(), dec.gpu.device
        pool, streamer = dec.pool, dec.pool.streamer
        cfg = dec.model.cfg
        k, n_exp = cfg.n_expert_used, cfg.n_expert
        ops = self.dl.ops
        group_cap = max(k, pool.layout.slots - k)  # slots one group may claim (the previous layer's stay pinned)
        for s in range(0, len(tokens), self.T):
            part = tokens[s:s + self.T]
            n = len(part)
            write_buffer(dec.gpu, self.bufs["ids"], 0, struct.pack(f"<{n}I", *part))
            words = [n, pos0 + s, 0, 0]
            start = 0
            for layer, after_group, after_experts in self.cuts:
                raw = await h.step(dev, self.chunk_buf, words, ops.slice(start, after_group), self.bufs["route_ids"],
                                   0, self.ids_staging, 4 * n * k)
                stats["syncs"] += 1
                union = sorted(set(struct.unpack(f"<{n * k}I", raw.to_bytes())))
                experts = ops.slice(after_group, after_experts)
                for g in range(0, len(union), group_cap):
                    group = union[g:g + group_cap]
                    slots = await streamer.ensure(layer, group)
                    pool.flush_map()
                    if len(union) > group_cap:  # several groups: each computes only its own experts
                        mask = [0] * n_exp
                        for e in group:
                            mask[e] = 1
                        write_buffer(dec.gpu, self.bufs["mask"], 0, struct.pack(f"<{n_exp}I", *mask))
                    h.replay(dev, experts)
                    streamer.release(set(slots))  # the submit reading them is queued; later uploads follow it
                    stats["prefill_groups"] = stats.get("prefill_groups", 0) + 1
                if len(union) > group_cap:
                    write_buffer(dec.gpu, self.bufs["mask"], 0, struct.pack(f"<{n_exp}I", *[1] * n_exp))
                start = after_experts
            h.replay(dev, ops.slice(start, self.dl.count))  # the last layer's combine (and shared expert)
            streamer.advance_token(n)  # the policy's clock counts tokens, whether they came in chunks or not
            self.chunks += 1

    def release(self):
        self.ck.release()
        for b in self.bufs.values():
            b.destroy()
        self.chunk_buf.destroy()
        self.ids_staging.destroy()
