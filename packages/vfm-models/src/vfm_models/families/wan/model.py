"""wan: Wan 2.1 text-to-video (diffusers ``WanTransformer3DModel``) on vfm's transformer skeleton.

cond = {"text": (B, L, text_dim)} (UMT5-XXL embeddings, zero-padded to 512 tokens by Wan's
pipeline). Wan was trained attending to the padding too, so ``text_mask`` is ignored unless
``use_text_mask=True``. The network takes vfm's rectified-flow time s in [0, 1] and feeds
``s * timestep_scale`` (Wan: 1000) to its timestep embedder, so a converted checkpoint trains and
samples with vfm's ``rectified-flow`` formulation as it is (Wan's flow: x_s = (1-s) x0 + s eps, v = eps - x0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn

from vfm_models.blocks.adaln import AdaLNShared
from vfm_models.blocks.embedders import TimestepEmbedder
from vfm_models.blocks.patch import PatchEmbed3D
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import TransformerConfig, check_positive
from vfm_models.families.plan import transformer_plan
from vfm_models.families.spec import ModelFamily
from vfm_models.families.wan.layers import TextProjection, WanBlock, WanFinalLayer

#: TransformerConfig fields whose value Wan fixes (its layers do not read them).
_FIXED = dict(num_kv_heads=None, mlp="gelu", norm="layer", qk_norm=True, pos_embed="rope", adaln_lora_rank=0,
              num_classes=0, timestep_freq_shift=0)


@dataclass
class WanConfig(TransformerConfig):
    in_channels: int = 16
    hidden: int = 1536
    depth: int = 30
    num_heads: int = 12
    ffn_dim: int = 8960
    text_dim: int = 4096  # UMT5-XXL
    freq_dim: int = 256  # sinusoidal timestep features
    eps: float = 1e-6
    timestep_scale: float = 1000.0  # vfm's s in [0, 1] -> Wan's timestep in [0, 1000]
    use_text_mask: bool = False
    qk_norm: bool = True
    pos_embed: str = "rope"

    def __post_init__(self) -> None:
        super().__post_init__()
        wrong = {k: getattr(self, k) for k, v in _FIXED.items() if getattr(self, k, v) != v}
        if wrong:
            raise ValueError(f"the wan family fixes {', '.join(f'{k}={_FIXED[k]!r}' for k in wrong)}; got {wrong}")
        if self.output_channels != self.in_channels:
            raise ValueError(f"wan predicts a velocity of the input's shape: out_channels must equal in_channels "
                             f"({self.in_channels}) or be unset; got {self.out_channels}")
        # eps 0 divides by zero on a constant token; a negative one gives NaN
        check_positive(self, ("eps", "timestep_scale"), "wan's ")
        if self.ffn_dim < 1 or self.text_dim < 1 or self.freq_dim < 2:
            raise ValueError(f"wan needs ffn_dim, text_dim >= 1 and freq_dim >= 2; got {self.ffn_dim}, "
                             f"{self.text_dim}, {self.freq_dim}")
        self.mlp_ratio = self.ffn_dim / self.hidden  # for the estimates that read mlp_ratio


PRESETS = {
    "tiny": dict(hidden=48, depth=2, num_heads=2, ffn_dim=64, text_dim=16, freq_dim=32, in_channels=4),
    # Wan-AI/Wan2.1-T2V-{1.3B,14B}-Diffusers, transformer/config.json (head_dim 128)
    "1.3B": dict(hidden=1536, depth=30, num_heads=12, ffn_dim=8960),
    "14B": dict(hidden=5120, depth=40, num_heads=40, ffn_dim=13824),
}


class Wan(DiffusionTransformer):
    block_cls = WanBlock

    def __init__(self, cfg: WanConfig) -> None:
        nn.Module.__init__(self)  # not DiffusionTransformer's: Wan's embedders and head differ from DiT's
        self.config = cfg
        D, patch = cfg.hidden, cfg.patch
        self.x_embedder = PatchEmbed3D(cfg.in_channels, D, patch)
        self.t_embedder = TimestepEmbedder(D, cfg.freq_dim)
        self.adaln_shared = AdaLNShared(D, WanBlock.chunks)  # Wan's time_proj: silu(c) -> (B, 6D)
        self.text_embedder = TextProjection(cfg.text_dim, D)
        self.blocks = nn.ModuleList(WanBlock(cfg, i) for i in range(cfg.depth))
        self.final_layer = WanFinalLayer(D, patch[0] * patch[1] * patch[2] * cfg.output_channels, cfg.eps)
        self.initialize_weights()

    def initialize_weights(self) -> None:
        """Wan's initialisation (Wan2.1 ``WanModel.init_weights``): xavier-uniform Linears with zero
        biases, the patch embedding xavier-uniform, the time embedder normal(0, 0.02), the output
        linear zero; the modulation tables keep randn / sqrt(D). Fine-tuning replaces all of it.

        One change: the text embedder's Linears are normal(0, 1/sqrt(fan_in)), not Wan's normal(0, 0.02).
        Wan's std is 1/sqrt(fan_in) for a 2500-wide input: at its own sizes (4096 -> 1536 -> 1536) the
        text MLP leaves unit-scale text at rms 0.67 with Wan's std and 0.65 with this one, but at the
        demo's widths (64 -> 96 -> 96) Wan's left it at 0.02, and the model learnt to ignore the prompt
        (README, "Training wan from scratch")."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.xavier_uniform_(self.x_embedder.proj.weight)
        for module in self.text_embedder.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=module.in_features ** -0.5)
        for module in self.t_embedder.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)
        nn.init.zeros_(self.final_layer.linear.weight)

    def context(self, grid, t, cond=None):
        ctx = super().context(grid, t, self._wan_cond(cond))
        return ctx.replace(mod=self.adaln_shared(ctx.c), text=self.text_embedder(ctx.text))

    def context_packed(self, grids, cu_seqlens, t, cond=None):
        ctx = super().context_packed(grids, cu_seqlens, t, self._wan_cond(cond))
        return ctx.replace(mod=self.adaln_shared(ctx.c), text=self.text_embedder(ctx.text))

    def parallel_plan(self):
        # without its mask Wan attends to padded text tokens too: padding them on changes its outputs
        return transformer_plan(self, {"attn.core": "full", "cross_attn.core": "cross"},
                                masks_text_padding=self.config.use_text_mask)

    def conditioning_modules(self):
        return ("t_embedder", "adaln_shared", "text_embedder")

    def _condition(self, t: torch.Tensor, cond) -> torch.Tensor:
        return self.t_embedder(t.float() * self.config.timestep_scale)

    def _wan_cond(self, cond):
        if not isinstance(cond, Mapping):  # None, or a wrong type that the base's check names
            return cond
        cond = dict(cond)
        if not self.config.use_text_mask:
            cond.pop("text_mask", None)
        return cond


FAMILY = ModelFamily(
    name="wan",
    config_cls=WanConfig,
    build=Wan,
    presets=PRESETS,
    description=(
        "Wan 2.1 T2V (diffusers WanTransformer3DModel): adaLN tables + shared time_proj, text MLP + "
        "cross-attention, QK RMSNorm over all heads, 3D RoPE. TP: q/k/v and mlp.fc1 colwise, o and mlp.fc2 "
        "rowwise, in attn and cross_attn (the q/k norm sums over the TP group). Attention: attn.core full, "
        "cross_attn.core cross. PP cuts between blocks. Conditioning: t_embedder, adaln_shared, text_embedder."
    ),
)
