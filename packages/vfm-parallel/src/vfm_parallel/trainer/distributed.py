"""Process group, coordinates of this rank, and the hand-off to :func:`vfm_parallel.parallelize`.

``torchrun`` sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR; a plain ``python`` run is one
process and starts no process group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from vfm_parallel.dims import MESH_DIMS, ParallelDims
from vfm_parallel.parallel_model import ParallelModel, StrategyOptionError, parallelize
from vfm_parallel.trainer.config import ConfigError, ParallelConfig


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


@dataclass(frozen=True)
class Coordinates:
    """This rank's place in the (pp, dp_replicate, dp_shard, cp, tp) mesh, row-major like DeviceMesh."""

    rank: int
    world_size: int
    sizes: dict[str, int]
    index: dict[str, int]

    @classmethod
    def of(cls, rank: int, sizes: dict[str, int]) -> "Coordinates":
        index, rest = {}, rank
        for name in reversed(MESH_DIMS):
            index[name] = rest % sizes[name]
            rest //= sizes[name]
        world = 1
        for name in MESH_DIMS:
            world *= sizes[name]
        return cls(rank, world, dict(sizes), {n: index[n] for n in MESH_DIMS})

    @property
    def dp_rank(self) -> int:
        return self.index["dp_replicate"] * self.sizes["dp_shard"] + self.index["dp_shard"]

    @property
    def dp_size(self) -> int:
        return self.sizes["dp_replicate"] * self.sizes["dp_shard"]

    @property
    def cp_rank(self) -> int:
        return self.index["cp"]


def data_share_group(coords: Coordinates) -> Any:
    """The ranks that train on the same batch (one data-parallel rank's pp x cp x tp peers), as a
    gloo group for the loader's model-parallel subset loading (batches are CPU tensors, also next to
    NCCL); ``None`` where this rank has no peers. Collective: every rank must call it."""
    peers = coords.world_size // coords.dp_size
    if peers == 1 or not dist.is_initialized():
        return None
    by_dp: dict[int, list[int]] = {}
    for rank in range(coords.world_size):
        by_dp.setdefault(Coordinates.of(rank, coords.sizes).dp_rank, []).append(rank)
    mine, _ = dist.new_subgroups_by_enumeration(list(by_dp.values()), backend="gloo")
    return mine


def default_strategies(cfg: ParallelConfig, sizes: dict[str, int]) -> list[str]:
    """Strategy names for the dims when the config lists none: one per dimension in use."""
    names = []
    if sizes["pp"] > 1:
        names.append("pp")
    if sizes["tp"] > 1:
        names.append("tp")
    if sizes["cp"] > 1:
        names.append("cp-ring")
    if cfg.activation_checkpointing:
        names.append("ac")
    if cfg.compile:
        names.append("compile")
    data_parallel = ParallelDims(**sizes).data_parallel_strategy
    if data_parallel:
        names.append(data_parallel)
    return names


def check_strategy_options(cfg: ParallelConfig, strategies: list[str]) -> None:
    """``parallel.strategy_options`` name strategies the run uses, and only options their ``apply``
    takes: a :class:`ConfigError` naming the key, checked with no process group (``vfm train``
    validates it before any rank starts; :func:`parallelize_model` again)."""
    from vfm_parallel.parallel_model import _check_options
    from vfm_parallel.strategy import get_strategy

    unused = sorted(set(cfg.strategy_options) - set(strategies))
    if unused:
        raise ConfigError(f"parallel.strategy_options.{unused[0]}", f"options for a strategy this run does not use; "
                          f"it uses: {', '.join(strategies) or '(none)'} (parallel.strategies, else vfm's defaults for the layout)")
    for name, options in cfg.strategy_options.items():
        try:
            _check_options(get_strategy(name), options)
        except StrategyOptionError as exc:
            raise ConfigError(f"parallel.strategy_options.{exc.strategy}", str(exc)) from None


def parallelize_model(model: torch.nn.Module, cfg: ParallelConfig, sizes: dict[str, int], device: torch.device,
                      tokens: int | None = None) -> ParallelModel:
    """Apply the configured strategies with :func:`vfm_parallel.parallelize`; one process needs none
    (then the model is returned as it is, in the same :class:`ParallelModel` wrapper)."""
    strategies = list(cfg.strategies) or default_strategies(cfg, sizes)
    check_strategy_options(cfg, strategies)
    if not dist.is_initialized() and not strategies:
        model = model.to(device)
        plan = model.parallel_plan() if hasattr(model, "parallel_plan") else None
        return ParallelModel(model=model, inner=model, mesh=None, dims=ParallelDims(), plan=plan,
                             device_type=device.type, strategies=[])

    options = {name: dict(values) for name, values in cfg.strategy_options.items()}
    if "ac" in strategies and cfg.checkpointing():
        options["ac"] = cfg.checkpointing()  # mode and blocks; "ac" listed with the key false: all blocks, full
    if "pp" in strategies:
        from vfm_parallel.trainer.pipeline import packed_weighted_mse

        options["pp"] = {"schedule": cfg.pp_schedule, "microbatches": cfg.pp_microbatches or sizes["pp"],
                         "loss_fn": packed_weighted_mse}
    pm = parallelize(model.to(device), ParallelDims(**sizes), strategies=strategies, device_type=device.type,
                     tokens=tokens, options=options)
    _hook_packed_forward(pm.model)
    return pm


def _hook_packed_forward(model: torch.nn.Module) -> None:
    """FSDP2 gathers the root's parameters in a hook on ``forward`` only; a packed batch enters
    through ``forward_packed`` (docs/contracts.md section 1), which needs the same hooks."""
    from torch.distributed.fsdp import FSDPModule, register_fsdp_forward_method

    if isinstance(model, FSDPModule) and hasattr(model, "forward_packed"):
        register_fsdp_forward_method(model, "forward_packed")
