"""A tiny model family provided from outside vfm, through one hook."""

from __future__ import annotations

from dataclasses import dataclass

from vfm_models import hookimpl
from vfm_models.families import ModelFamily, ParallelPlan


@dataclass
class TinyConfig:
    channels: int = 4
    dim: int = 16
    depth: int = 2


def build(config: TinyConfig):
    import torch
    from torch import nn

    class TinyMixer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj_in = nn.Linear(config.channels, config.dim)
            self.blocks = nn.ModuleList(nn.Linear(config.dim, config.dim) for _ in range(config.depth))
            self.proj_out = nn.Linear(config.dim, config.channels)

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, T, H, W) -> same
            tokens = x.flatten(2).transpose(1, 2)
            h = self.proj_in(tokens)
            for block in self.blocks:
                h = h + torch.tanh(block(h))
            return self.proj_out(h).transpose(1, 2).reshape(x.shape)

        def parallel_plan(self) -> ParallelPlan:
            return ParallelPlan(blocks="blocks", pre_blocks=("proj_in",), post_blocks=("proj_out",), num_layers=config.depth)

    return TinyMixer()


FAMILY = ModelFamily(
    name="tiny-mixer",
    config_cls=TinyConfig,
    build=build,
    presets={"XS": {"dim": 8, "depth": 1}, "S": {"dim": 16, "depth": 2}},
    description="a per-token MLP mixer (third-party example)",
)


@hookimpl
def vfm_models_register_families(register) -> None:
    register("tiny-mixer", FAMILY, description=FAMILY.description)
