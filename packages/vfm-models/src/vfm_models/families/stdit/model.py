"""stdit: each block attends within frames (spatial), along time (temporal), to text (cross), then an MLP.

Blocks listed in ``full_attention_blocks`` replace the spatial attention by full self-attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from vfm_models.blocks.transformer import STDiTBlock
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import DIT_SIZES, TransformerConfig
from vfm_models.families.plan import transformer_plan
from vfm_models.families.spec import ModelFamily


@dataclass
class STDiTConfig(TransformerConfig):
    text_dim: int = 4096
    qk_norm: bool = True
    full_attention_blocks: Tuple[int, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.full_attention_blocks, (str, bytes)) or not hasattr(self.full_attention_blocks, "__iter__"):
            raise ValueError(f"full_attention_blocks must be a list of block indices (e.g. [0, 5]); "
                             f"got {self.full_attention_blocks!r}")
        self.full_attention_blocks = tuple(int(i) for i in self.full_attention_blocks)
        bad = [i for i in self.full_attention_blocks if not 0 <= i < self.depth]
        if bad:
            raise ValueError(f"full_attention_blocks {bad} are outside 0..{self.depth - 1}")


PRESETS = {
    "tiny": dict(hidden=32, depth=2, num_heads=2, text_dim=16),
    **DIT_SIZES,
}


class STDiT(DiffusionTransformer):
    block_cls = STDiTBlock

    def parallel_plan(self):
        attention = {"spatial_attn.core": "spatial", "temporal_attn.core": "temporal", "cross_attn.core": "cross"}
        overrides = {i: {"spatial_attn.core": "full"} for i in self.config.full_attention_blocks}
        return transformer_plan(self, attention, overrides)


FAMILY = ModelFamily(
    name="stdit",
    config_cls=STDiTConfig,
    build=STDiT,
    presets=PRESETS,
    description=(
        "Spatio-temporal DiT. TP: q/k/v and mlp.fc1 colwise, o and mlp.fc2 rowwise in spatial_attn, "
        "temporal_attn, cross_attn. Attention: spatial_attn.core spatial (full in full_attention_blocks, "
        "see plan.attention_overrides), temporal_attn.core temporal, cross_attn.core cross. PP cuts "
        "between blocks. Conditioning: t_embedder."
    ),
)
