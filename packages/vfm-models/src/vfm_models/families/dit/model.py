"""DiT: adaLN-Zero blocks, fixed sin-cos positions, class-conditional (cond={"y": (B,) long})."""

from __future__ import annotations

from dataclasses import dataclass

from vfm_models.blocks.transformer import DiTBlock
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import DIT_SIZES, TransformerConfig
from vfm_models.families.plan import transformer_plan
from vfm_models.families.spec import ModelFamily


@dataclass
class DiTConfig(TransformerConfig):
    num_classes: int = 1000


#: The DiT paper's sizes (Table 1) plus a tiny one for CPU tests.
PRESETS = {
    "tiny": dict(hidden=32, depth=2, num_heads=2, num_classes=10),
    **DIT_SIZES,
}


class DiT(DiffusionTransformer):
    block_cls = DiTBlock

    def parallel_plan(self):
        return transformer_plan(self, {"attn.core": "full"})


FAMILY = ModelFamily(
    name="dit",
    config_cls=DiTConfig,
    build=DiT,
    presets=PRESETS,
    description=(
        "adaLN-Zero DiT, class-conditional. TP: attn.q/k/v, mlp.fc1 colwise; attn.o, mlp.fc2 rowwise. "
        "Attention: attn.core full. PP cuts between blocks. Conditioning: t_embedder, y_embedder."
    ),
)
