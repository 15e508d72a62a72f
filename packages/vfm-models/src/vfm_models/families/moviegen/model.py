"""moviegen: the Llama block (RMSNorm, SwiGLU, grouped-query attention, RoPE) with adaLN and text cross-attention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from vfm_models.blocks.transformer import DiTBlock
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import TransformerConfig
from vfm_models.families.plan import transformer_plan
from vfm_models.families.spec import ModelFamily


@dataclass
class MovieGenConfig(TransformerConfig):
    norm: str = "rms"
    mlp: str = "swiglu"
    num_kv_heads: Optional[int] = 2
    qk_norm: bool = True
    pos_embed: str = "rope"
    text_dim: int = 4096
    in_channels: int = 16


PRESETS = {
    "tiny": dict(hidden=32, depth=2, num_heads=4, num_kv_heads=2, text_dim=16, in_channels=4),
    "S": dict(hidden=384, depth=12, num_heads=6, num_kv_heads=2),
    "B": dict(hidden=768, depth=12, num_heads=12, num_kv_heads=4),
    "L": dict(hidden=1024, depth=24, num_heads=16, num_kv_heads=4),
}


class MovieGen(DiffusionTransformer):
    block_cls = DiTBlock

    def parallel_plan(self):
        return transformer_plan(self, {"attn.core": "full", "cross_attn.core": "cross"})


FAMILY = ModelFamily(
    name="moviegen",
    config_cls=MovieGenConfig,
    build=MovieGen,
    presets=PRESETS,
    description=(
        "Llama-style (RMSNorm, SwiGLU, GQA, 3D RoPE) with adaLN and text cross-attention. TP: q/k/v, "
        "mlp.w1/w3 colwise; o, mlp.w2 rowwise (kv heads % tp == 0). Attention: attn.core full, "
        "cross_attn.core cross. PP cuts between blocks. Conditioning: t_embedder."
    ),
)
