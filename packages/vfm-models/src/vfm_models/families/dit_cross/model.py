"""dit-cross: adaLN-Zero self-attention and MLP, a cross-attention to text between them, QK-norm, 3D RoPE.

cond = {"text": (B, L, text_dim), "text_mask": (B, L) bool}. The cross-attention's keys and values
project straight from the text width (no separate text projection), and it is not modulated (as in
PixArt-alpha); ``adaln_lora_rank > 0`` switches the modulation to AdaLN-LoRA.
"""

from __future__ import annotations

from dataclasses import dataclass

from vfm_models.blocks.transformer import DiTBlock
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import DIT_SIZES, TransformerConfig
from vfm_models.families.plan import transformer_plan
from vfm_models.families.spec import ModelFamily


@dataclass
class DiTCrossConfig(TransformerConfig):
    text_dim: int = 4096  # T5-XXL / UMT5-XXL width
    qk_norm: bool = True
    pos_embed: str = "rope"


_VIDEO = dict(in_channels=16, patch=(1, 2, 2))
PRESETS = {
    "tiny": dict(hidden=32, depth=2, num_heads=2, text_dim=16),
    **DIT_SIZES,
    # The seeds' throughput-table models (32 x 3072 and 48 x 5120, head_dim 128); ~6.9B and ~27.2B.
    "7B": dict(hidden=3072, depth=32, num_heads=24, **_VIDEO),
    "28B": dict(hidden=5120, depth=48, num_heads=40, **_VIDEO),
}


class DiTCross(DiffusionTransformer):
    block_cls = DiTBlock

    def parallel_plan(self):
        return transformer_plan(self, {"attn.core": "full", "cross_attn.core": "cross"})


FAMILY = ModelFamily(
    name="dit-cross",
    config_cls=DiTCrossConfig,
    build=DiTCross,
    presets=PRESETS,
    description=(
        "adaLN-Zero DiT + text cross-attention + QK RMSNorm + 3D RoPE, optional AdaLN-LoRA. TP: q/k/v and "
        "mlp.fc1 colwise, o and mlp.fc2 rowwise, in attn and cross_attn. Attention: attn.core full, "
        "cross_attn.core cross. PP cuts between blocks. Conditioning: t_embedder (+ adaln_shared with LoRA)."
    ),
)
