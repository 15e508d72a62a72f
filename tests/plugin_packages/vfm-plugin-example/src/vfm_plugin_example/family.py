from dataclasses import dataclass

from vfm_models.blocks.transformer import DiTBlock
from vfm_models.families import ModelFamily
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import TransformerConfig
from vfm_models.families.plan import transformer_plan


@dataclass
class SwiGLUDiTConfig(TransformerConfig):
    mlp: str = "swiglu"
    norm: str = "rms"
    num_classes: int = 10


class SwiGLUDiT(DiffusionTransformer):
    block_cls = DiTBlock

    def parallel_plan(self):  # how vfm-parallel may split it: this block's attention is full
        return transformer_plan(self, {"attn.core": "full"})


FAMILY = ModelFamily(
    name="swiglu-dit",
    config_cls=SwiGLUDiTConfig,
    build=SwiGLUDiT,
    presets={"tiny": dict(hidden=32, depth=2, num_heads=2), "S": dict(hidden=384, depth=12, num_heads=6)},
    description="DiT with RMSNorm and a SwiGLU MLP, class-conditional",
)
