"""qwen35moe (Qwen3.5 / Qwen3.6-35B-A3B): hyper-parameters from the GGUF, the tensors by their GGUF names, the
per-token plan of the hybrid stack.

After llama.cpp src/models/qwen35moe.cpp (and delta-net-base.cpp for the recurrence):
    x = token_embd[token]
    per layer: h = x + mixer(attn_norm(x)); x = h + moe(post_attention_norm(h)) + sigmoid(w·xn)·shared(xn)
      mixer = Gated DeltaNet on recurrent layers, gated full attention on the others
    logits = output(output_norm(x))
Recurrent layers: `attention.recurrent_layers` when present, else (i + 1) % full_attention_interval != 0. Norm
weights already hold the +1. Full attention: per head the q projection yields [query | gate]; q/k RMSNorm, NeoX
RoPE on the first n_rot dims, output × sigmoid(gate). Gated DeltaNet: see shaders/gdn_*.wgsl.
"""
from dataclasses import dataclass

from ..gpu.fused_kernels import down_combine_fits, route_layout
from ..gpu.qwen35_kernels import (gated_norm_product, gated_output_product, gdn_conv_recurrent, gdn_sq_parts,
                                  pregated_norm_fits, pregated_norm_product)
from .common import (arch_value, load_projections, moe_act_values, output_buffers, record_output, record_products,
                     record_routed_moe)


def rope_pairs_all_rotate(sections, n_rot: int) -> bool:
    """Whether every rotary pair turns with the token position for text under llama.cpp's interleaved
    multi-section RoPE: pair i belongs to section s = (i % Σsections) % 3 when (i % Σsections) < 3·sections[s]
    (text positions are equal in the t/h/w sections), else to section e, which text holds at position 0."""
    if not sections or not any(sections):
        return True
    total = sum(sections)
    for i in range(n_rot // 2):
        sector = i % total
        if sector >= 3 * sections[sector % 3]:
            return False
    return True


def layer_pattern(header, n_layer: int) -> tuple:
    """True for each recurrent (Gated DeltaNet) layer (llama.cpp llama_model_qwen35moe::load_arch_hparams)."""
    key = f"{header.architecture}.attention.recurrent_layers"
    if key in header.metadata:
        flags = [bool(v) for v in header.metadata[key]]
        if len(flags) < n_layer:
            raise ValueError(f"{key} has {len(flags)} entries for {n_layer} layers")
        return tuple(flags[:n_layer])
    interval = arch_value(header, "full_attention_interval", 4)
    return tuple((i + 1) % interval != 0 for i in range(n_layer))


@dataclass(frozen=True)
class Qwen35MoeConfig:
    n_vocab: int
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    rope_base: float
    rms_eps: float
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_ff_shexp: int
    n_ctx_train: int
    ssm_conv_kernel: int
    ssm_d_state: int  # key (and value) head dim of the linear attention
    ssm_n_group: int  # key heads
    ssm_dt_rank: int  # value heads
    ssm_d_inner: int  # value heads * value head dim
    recurrent: tuple  # per layer: Gated DeltaNet (True) or full attention (False)

    @property
    def head_v_dim(self) -> int:
        return self.ssm_d_inner // self.ssm_dt_rank

    @property
    def conv_channels(self) -> int:
        return 2 * self.ssm_n_group * self.ssm_d_state + self.ssm_d_inner

    @classmethod
    def from_header(cls, header):
        if header.architecture != "qwen35moe":
            raise ValueError(f"not a qwen35moe model: general.architecture = {header.architecture!r}")
        v = lambda key, default=None, kind=int: arch_value(header, key, default, kind)  # noqa: E731
        head_dim = v("attention.key_length")
        if v("attention.value_length", head_dim) != head_dim:
            raise ValueError("qwen35moe with value_length != key_length is not supported")
        n_layer = v("block_count") - v("nextn_predict_layers", 0)  # MTP blocks are not run in the main pass
        n_rot = v("rope.dimension_count", head_dim)
        sections = [int(s) for s in header.metadata.get("qwen35moe.rope.dimension_sections", [])]
        if not rope_pairs_all_rotate(sections, n_rot):
            raise ValueError(f"rope sections {sections} leave some of the {n_rot} rotary dims unrotated for text; "
                             "the engine's RoPE kernel rotates all of them")
        cfg = cls(
            n_vocab=header.tensor("token_embd.weight").shape[0],
            n_layer=n_layer,
            n_embd=v("embedding_length"),
            n_head=v("attention.head_count"),
            n_head_kv=v("attention.head_count_kv"),
            head_dim=head_dim,
            n_rot=n_rot,
            rope_base=v("rope.freq_base", kind=float),
            rms_eps=v("attention.layer_norm_rms_epsilon", kind=float),
            n_expert=v("expert_count"),
            n_expert_used=v("expert_used_count"),
            n_ff_exp=v("expert_feed_forward_length"),
            # older conversions lack the key: the shared expert's own shape says it
            n_ff_shexp=v("expert_shared_feed_forward_length", 0) or header.tensor("blk.0.ffn_up_shexp.weight").shape[0],
            n_ctx_train=v("context_length", 0),
            ssm_conv_kernel=v("ssm.conv_kernel"),
            ssm_d_state=v("ssm.state_size"),
            ssm_n_group=v("ssm.group_count"),
            ssm_dt_rank=v("ssm.time_step_rank"),
            ssm_d_inner=v("ssm.inner_size"),
            recurrent=layer_pattern(header, n_layer),
        )
        if cfg.ssm_d_inner % cfg.ssm_dt_rank or cfg.ssm_dt_rank % cfg.ssm_n_group:
            raise ValueError(f"linear attention: {cfg.ssm_dt_rank} value heads, {cfg.ssm_n_group} key heads and "
                             f"inner size {cfg.ssm_d_inner} do not divide evenly")
        return cfg


class Qwen35Moe:
    arch = "qwen35moe"

    def __init__(self, cfg: Qwen35MoeConfig):
        self.cfg = cfg
        self.layers = []  # per layer: {short GGUF name: GPU tensor}
        # only full-attention layers own a KV cache: layer -> its index among them
        self.kv_index = {i: n for n, i in enumerate(i for i, r in enumerate(cfg.recurrent) if not r)}

    @property
    def n_kv_layers(self) -> int:
        return len(self.kv_index)

    def work_buffers(self):
        """(name, f32 values) of the activations one token needs, and each recurrent layer's state (conv window of
        the last kernel - 1 inputs, delta-rule state n_v × d_k × d_v), kept across tokens. The decode step fuses
        gate/up away and writes each mixer's input projections into one buffer (attn_in: qg | k | v; dn_in:
        beta | alpha | qkv | z), where the prefill's GEMMs write qg, kv, ssm_gates, qkv and z; the chunked
        prefill sizes its buffers from this list."""
        c = self.cfg
        hd, e, k = c.head_dim, c.n_embd, c.n_expert_used
        bufs = [("h", e), ("xn", e), ("qg", 2 * c.n_head * hd), ("q", c.n_head * hd),
                ("attn_in", 2 * (c.n_head + c.n_head_kv) * hd),
                ("dn_in", 2 * c.ssm_dt_rank + c.conv_channels + c.ssm_d_inner),
                ("kv", 2 * c.n_head_kv * hd), ("attn", c.n_head * hd),
                ("qkv", c.conv_channels), ("qkv_conv", c.conv_channels), ("z", c.ssm_d_inner),
                ("ssm_gates", 2 * c.ssm_dt_rank), ("delta_out", c.ssm_d_inner), ("delta_normed", c.ssm_d_inner),
                ("delta_sq", c.ssm_dt_rank * gdn_sq_parts(c.head_v_dim)),
                ("router", c.n_expert), ("route_ids", k), ("route_w", k), ("route", route_layout(c.n_expert, k)[2]),
                ("gate", k * c.n_ff_exp),
                ("up", k * c.n_ff_exp), ("act", moe_act_values(c, c.n_ff_shexp)), ("down", k * e),
                ("shexp_gate", c.n_ff_shexp), ("shexp_up", c.n_ff_shexp), ("shexp_act", c.n_ff_shexp),
                ("shexp_out", e)] + output_buffers(c)
        for i, rec in enumerate(c.recurrent):
            if rec:
                bufs += [(f"conv_window.{i}", c.ssm_conv_kernel * c.conv_channels),  # a ring: gdn_conv_step.wgsl
                         (f"ssm_state.{i}", c.ssm_dt_rank * c.ssm_d_state * c.head_v_dim)]
        return bufs

    def load(self, loader):
        """Upload the dense trunk and (for now) every layer's experts as that layer's pool."""
        c = self.cfg
        e = c.n_embd
        self.token_embd = loader.matrix("token_embd.weight", (c.n_vocab, e))
        self.output_norm = loader.vector("output_norm.weight", e)
        self.output = loader.matrix("output.weight", (c.n_vocab, e)) if loader.has("output.weight") else self.token_embd
        for i in range(c.n_layer):
            p = f"blk.{i}."
            w = {
                "attn_norm": loader.vector(p + "attn_norm.weight", e),
                # record_routed_moe normalises with w["ffn_norm"]: here the post-attention norm
                "ffn_norm": loader.vector(p + "post_attention_norm.weight", e),
                "ffn_gate_inp_shexp": loader.vector(p + "ffn_gate_inp_shexp.weight", e),
                **(self._load_pooled_experts(loader, p) or self._load_experts(loader, p)),
            }
            w.update(self._load_delta_net(loader, p) if c.recurrent[i] else self._load_attention(loader, p))
            self.layers.append(w)

    def _expert_parts(self, p):
        """(key, GGUF name, shape) of the router and of the routed and shared experts' matrices."""
        c = self.cfg
        e, n, f, fs = c.n_embd, c.n_expert, c.n_ff_exp, c.n_ff_shexp
        return [("ffn_gate_inp", p + "ffn_gate_inp.weight", (n, e)),
                ("ffn_gate_exps", p + "ffn_gate_exps.weight", (n, f, e)),
                ("ffn_up_exps", p + "ffn_up_exps.weight", (n, f, e)),
                ("ffn_down_exps", p + "ffn_down_exps.weight", (n, e, f)),
                ("ffn_gate_shexp", p + "ffn_gate_shexp.weight", (fs, e)),
                ("ffn_up_shexp", p + "ffn_up_shexp.weight", (fs, e)),
                ("ffn_down_shexp", p + "ffn_down_shexp.weight", (e, fs))]

    def _load_experts(self, loader, p):
        return {key: loader.matrix(name, shape, key.endswith("_exps")) for key, name, shape in self._expert_parts(p)}

    def _load_pooled_experts(self, loader, p):
        """The shared expert stacked into each pool after the routed experts (slot n_expert: ffn_{gate,up,down}_pool)
        and its gate vector under the router (ffn_router, the gate's logit after the experts'), so the decode runs it
        as one more expert of the routed dispatches (common.record_routed_moe). The parts stay row views under their
        own keys (the prefill's GEMMs). None where they cannot be stacked: a loader that streams the experts, a shared
        expert of another width or type, or a block moe_down_combine cannot sum."""
        c = self.cfg
        if c.n_ff_shexp != c.n_ff_exp or not down_combine_fits(c.n_expert_used, c.n_ff_exp, True):
            return None
        parts = {key: (name, shape) for key, name, shape in self._expert_parts(p)}
        stacks = [("ffn_router", "ffn_gate_inp", (p + "ffn_gate_inp_shexp.weight", (c.n_embd,)))] + [
            (f"ffn_{m}_pool", f"ffn_{m}_exps", parts[f"ffn_{m}_shexp"]) for m in ("gate", "up", "down")]
        if not all(loader.can_stack(p + key, [parts[first], second]) for key, first, second in stacks):
            return None  # checked first: nothing is uploaded for stacks that cannot all be made
        built = [loader.stacked(p + key, [parts[first], second]) for key, first, second in stacks]
        w = {}
        for (key, first, second), (matrix, views) in zip(stacks, built):
            w[key] = matrix
            w[first] = views[parts[first][0]]
            if key != "ffn_router":
                w[first.replace("_exps", "_shexp")] = views[second[0]]
        return w

    def _load_attention(self, loader, p):
        c = self.cfg
        hd, e = c.head_dim, c.n_embd
        w = load_projections(loader, "attn_in", p + "attn_in", [
            ("attn_q", p + "attn_q.weight", (2 * c.n_head * hd, e)),  # [query | gate] per head
            ("attn_k", p + "attn_k.weight", (c.n_head_kv * hd, e)),
            ("attn_v", p + "attn_v.weight", (c.n_head_kv * hd, e))])
        return {
            **w,
            "attn_output": loader.matrix(p + "attn_output.weight", (e, c.n_head * hd)),
            "attn_q_norm": loader.vector(p + "attn_q_norm.weight", hd),
            "attn_k_norm": loader.vector(p + "attn_k_norm.weight", hd),
        }

    def _load_delta_net(self, loader, p):
        c = self.cfg
        e, nv = c.n_embd, c.ssm_dt_rank
        # beta | alpha first: gdn_recurrent reads its gates from 0 of the decode's buffer
        w = load_projections(loader, "dn_in", p + "dn_in", [
            ("ssm_beta", p + "ssm_beta.weight", (nv, e)),
            ("ssm_alpha", p + "ssm_alpha.weight", (nv, e)),
            ("attn_qkv", p + "attn_qkv.weight", (c.conv_channels, e)),
            ("attn_gate", p + "attn_gate.weight", (c.ssm_d_inner, e))])  # z
        return {
            **w,
            "ssm_conv1d": loader.vector(p + "ssm_conv1d.weight", c.conv_channels * c.ssm_conv_kernel),
            "ssm_dt": loader.vector(p + "ssm_dt.bias", nv),
            "ssm_a": loader.vector(p + "ssm_a", nv),
            "ssm_norm": loader.vector(p + "ssm_norm.weight", c.head_v_dim),
            "ssm_out": loader.matrix(p + "ssm_out.weight", (e, c.ssm_d_inner)),
        }

    def record_token(self, kern, dl, acts, cache, slot_map):
        """One token from step.token to logits (and their argmax)."""
        c = self.cfg
        kern.embed(dl, self.token_embd, acts["h"], label="inp_embd")
        for i, w in enumerate(self.layers):
            if c.recurrent[i]:
                self._record_delta_net(kern, dl, acts, w, i)
            else:
                self._record_gated_attention(kern, dl, acts, w, i, cache)
            record_routed_moe(kern, dl, acts, w, i, slot_map, i * c.n_expert, c, shared=True)
        record_output(kern, dl, acts, self.output_norm, self.output, c)

    def _record_gated_attention(self, kern, dl, acts, w, i, cache):
        """h += attn_output(attention(rope(norm(q)), rope(norm(k)), v) · sigmoid(gate)) of attn_norm(h) (fused into
        the first input product). Three dispatches after the products: the attention, which norms and rotates q
        and k and appends K/V itself (attention_appending), its combine, the output product with the gate fused
        into its staging."""
        c = self.cfg
        hd, nh, nkv, kv = c.head_dim, c.n_head, c.n_head_kv, self.kv_index[i]
        qkv = acts["attn_in"]  # qg | k | v: the queries and the output gate are read from qg's heads
        k_base = 2 * nh * hd
        record_products(kern, dl, w["attn_in"], acts["h"], qkv, i, norm=(w["attn_norm"], c.rms_eps),
                        xn_out=acts["xn"])
        kern.attention_appending(dl, qkv, w["attn_q_norm"], w["attn_k_norm"], cache.k[kv], cache.v[kv], acts["attn"],
                                 nh, nkv, hd, c.n_rot, c.rms_eps, c.rope_base, 2 * hd, k_base, k_base + nkv * hd,
                                 hd ** -0.5, label=f"attn_pregate-{i}")
        gated_output_product(kern, dl, w["attn_output"], acts["attn"], qkv, nh, hd, acts["h"], label=f"attn_output-{i}")

    def _record_delta_net(self, kern, dl, acts, w, i):
        """h += ssm_out(RMSNorm(delta_rule(l2norm(q), l2norm(k), v)) · ssm_norm · silu(z)) with q|k|v =
        silu(conv(attn_qkv · x)), z = attn_gate · x; beta and the decay from ssm_beta / ssm_alpha · x."""
        c = self.cfg
        nv = c.ssm_dt_rank
        dn = acts["dn_in"]  # beta | alpha | qkv | z
        record_products(kern, dl, w["dn_in"], acts["h"], dn, i, norm=(w["attn_norm"], c.rms_eps),
                        xn_out=acts["xn"])
        z_base = 2 * nv + c.conv_channels
        # the gated norm's per-value factors and sums in the recurrence where the output product can finish it
        pre = pregated_norm_fits(kern, w["ssm_out"], c.head_v_dim)
        gdn_conv_recurrent(kern, dl, dn, w["ssm_conv1d"], acts[f"conv_window.{i}"], w["ssm_dt"], w["ssm_a"],
                           acts[f"ssm_state.{i}"], acts["delta_out"], c.ssm_n_group, nv, c.ssm_d_state, c.head_v_dim,
                           c.rms_eps, c.ssm_conv_kernel, 2 * nv, label=f"attn_output-{i}",
                           norm_w=w["ssm_norm"], z_base=z_base, sq_parts=acts["delta_sq"] if pre else None)
        if pre:
            pregated_norm_product(kern, dl, w["ssm_out"], acts["delta_out"], acts["delta_sq"], c.head_v_dim,
                                  c.rms_eps, acts["h"], label=f"linear_attn_out-{i}")
        else:
            gated_norm_product(kern, dl, w["ssm_out"], acts["delta_out"], w["ssm_norm"], dn, acts["delta_normed"],
                               nv, c.head_v_dim, c.rms_eps, acts["h"], z_base=z_base, label=f"linear_attn_out-{i}")
