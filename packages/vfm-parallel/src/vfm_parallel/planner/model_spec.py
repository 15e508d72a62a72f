"""What the planner knows about a model: plain numbers (vfm-parallel never imports vfm-models; the
CLI reads them off the family and hands them over)."""

from __future__ import annotations

from dataclasses import dataclass, fields


class SpecError(ValueError):
    """A model description with a missing or impossible number."""


@dataclass(frozen=True)
class ModelSpec:
    """A transformer as the planner sees it.

    ``flops_per_token``: training (forward + backward) model FLOPs per latent token; 0 = the DiT
    convention 6 N + 12 L h S (docs/design.md section 6, ``vfm_models.flops.model_flops_per_token``).
    ``tp_regions``: column/row-parallel pairs per block (self-attention, cross-attention, MLP), each
    one SP all-gather in and one reduce-scatter out. ``full_attention_layers``: the self-attentions
    CP communicates for (ring K/V hops, Ulysses all-to-alls): blocks with full attention, plus the
    spatial and temporal ones, which vfm's ring and Ulysses cores move as well (stdit: two per
    block, so more than the layers); -1 = one per layer.
    ``act_bytes_per_token``: bf16 activations a block keeps for backward, per token, in units of the
    hidden size (see docs/plan.md for the count). What selective checkpointing keeps is counted
    from the block's linears and attentions (:meth:`selective_widths`).
    """

    name: str
    params: int
    layers: int
    hidden: int
    heads: int
    seq_len: int
    kv_heads: int = 0  # 0 = heads
    text_len: int = 0
    flops_per_token: float = 0.0
    tp_regions: int = 3
    full_attention_layers: int = -1
    act_bytes_per_token: float = 54.0
    mlp_ratio: float = 4.0
    #: Attention-product FLOPs per token (training); 0 = 12 h S per full-attention block. A family with
    #: spatial or temporal attention (stdit) gives its own: 12 h (H'W') or 12 h T' per such block.
    attention_flops: float = 0.0
    #: Self-attentions per block (stdit: spatial and temporal = 2); the other TP regions but the MLP
    #: are cross-attentions.
    self_attentions: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                continue
            if f.name in ("kv_heads", "text_len", "flops_per_token", "attention_flops"):
                ok = value >= 0
            elif f.name == "full_attention_layers":
                ok = value >= -1
            else:
                ok = value > 0
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok:
                raise SpecError(f"model spec '{f.name}' must be a {'non-negative' if f.name in ('kv_heads', 'text_len') else 'positive'} number, got {value!r}")

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def num_heads(self) -> int:  # read by ParallelDims.validate as a plan
        return self.heads

    @property
    def num_layers(self) -> int:
        return self.layers

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def full_layers(self) -> int:
        return self.layers if self.full_attention_layers < 0 else self.full_attention_layers

    @property
    def model_flops_per_token(self) -> float:
        """6 N + 12 L h S unless the caller gave its own count."""
        if self.flops_per_token:
            return self.flops_per_token
        return 6.0 * self.params + 12.0 * self.layers * self.hidden * self.seq_len

    @property
    def attention_flops_per_token(self) -> float:
        """The attention-product share of the per-token FLOPs (12 L h S: QK^T and AV, fwd + bwd), or
        the family's own count (``attention_flops``)."""
        if self.attention_flops:
            return self.attention_flops
        return 12.0 * self.full_layers * self.hidden * self.seq_len

    def token_linears(self) -> list[tuple[int, int, str]]:
        """(in, out, TP style) of the per-token linears of one block: each TP region is a column-
        parallel projection in and a row-parallel one out (self-attention's QKV and output; with
        three regions the cross-attention's query and output; the MLP's two)."""
        kv = 2 * self.num_kv_heads * self.head_dim
        h, ffn = self.hidden, int(self.mlp_ratio * self.hidden)
        out = [(h, h + kv, "col"), (h, h, "row")]
        for i in range(max(0, self.tp_regions - 2)):  # further self-attentions (q, k, v), then cross (q)
            out += [(h, h + kv if i < self.self_attentions - 1 else h, "col"), (h, h, "row")]
        if self.tp_regions >= 2:
            out += [(h, ffn, "col"), (ffn, h, "row")]
        return out

    @property
    def attentions_per_block(self) -> int:
        """Attention kernels per block: the self-attention, plus one per extra TP region (cross-attention)."""
        return 1 + max(0, self.tp_regions - 2)

    def selective_widths(self) -> tuple[float, float]:
        """What vfm's selective checkpointing (``ac`` mode ``selective``) keeps of a block per token, in
        units of the hidden size: the outputs of its per-token matmuls and attentions (the ops its policy
        saves; the norms, modulations, RoPE, GELU, gates and residual adds are recomputed).
        (split by TP, not split): a column-parallel linear's output and an attention's output are split
        by heads/width; a row-parallel linear's output is its full-width partial sum before the
        reduce(-scatter) on every TP rank. dit-cross: q, k, v, self-attention out, cross-attention q and
        out, fc1 (4) = 10 split; o, cross o, fc2 = 3 not split; 13 of the 27 widths ``act_bytes_per_token``
        counts (the cross-attention's k and v come from the text, not per latent token)."""
        col = sum(n for _, n, style in self.token_linears() if style == "col") / self.hidden
        row = sum(n for _, n, style in self.token_linears() if style == "row") / self.hidden
        return col + self.attentions_per_block, row

    def with_seq_len(self, seq_len: int) -> "ModelSpec":
        from dataclasses import replace

        scale = seq_len / self.seq_len
        flops = self.flops_per_token
        if flops:  # keep a caller's count consistent: only the attention term grows with S
            flops = flops + self.attention_flops_per_token * (scale - 1)
        return replace(self, seq_len=seq_len, flops_per_token=flops)


def block_activation_bytes(*, self_attentions: int = 1, cross_attentions: int = 1, mlp: str = "gelu",
                           mlp_inner: float = 4.0, kv_share: float = 1.0, qk_norm: bool = True, rope: bool = True) -> float:
    """bf16 bytes per token per hidden unit that one block keeps for backward, counted from its parts
    (widths in units of the hidden size; dit-cross's 11 + 5 + 11 = 27 widths, 54 bytes):

    - a self-attention: the norm's and the modulation's outputs, q, the attention's output and the
      output projection's (5), k and v (2 x kv heads / heads: GQA narrows them), and with
      ``qk_norm`` and ``rope`` the normed and the rotated q and k (1 + kv share each): 7 + 4 x kv
      share with both;
    - a cross-attention: norm, q, its QK norm, the attention's and the output projection's output: 5
      (4 without QK norm; the keys and values are per text token);
    - the MLP: norm, modulation and output (3), plus fc1's output and GELU's (2 x inner) or SwiGLU's
      gate, up, SiLU and product (4 x inner), inner = the MLP width over the hidden size.

    ``tests/cli/test_plan_qa_cli.py`` checks the families' ratios against the tensors a real
    forward saves for backward."""
    if mlp not in ("gelu", "swiglu"):
        raise SpecError(f"mlp must be 'gelu' or 'swiglu', got {mlp!r}")
    self_widths = 5 + 2 * kv_share + (1 + kv_share) * (int(qk_norm) + int(rope))
    cross_widths = 4 + int(qk_norm)
    mlp_widths = 3 + (4 if mlp == "swiglu" else 2) * mlp_inner
    return 2.0 * (self_attentions * self_widths + cross_attentions * cross_widths + mlp_widths)
