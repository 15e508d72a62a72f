"""Parallel sizes, their validation against the world and the model, and the device mesh.

Mesh dimensions, outermost first: ``pp, dp_replicate, dp_shard, cp, tp`` (TP innermost, so a TP
group is made of neighbouring ranks: on GPUs, the same node's NVLink).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

MESH_DIMS: tuple[str, ...] = ("pp", "dp_replicate", "dp_shard", "cp", "tp")

#: The flattened dimensions :meth:`ParallelDims.build_mesh` adds, and the mesh dimensions each spans.
FLAT_DIMS: dict[str, tuple[str, ...]] = {
    "dp": ("dp_replicate", "dp_shard"),
    "dp_shard_cp": ("dp_shard", "cp"),
    "dp_cp": ("dp_replicate", "dp_shard", "cp"),
}


def divisors(n: int) -> list[int]:
    """Every divisor of ``n`` >= 1, ascending (the sizes a mesh dimension over ``n`` may take)."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _listed(values) -> str:
    values = list(values)
    return ", ".join(map(str, values)) if len(values) <= 12 else ", ".join(map(str, values[:11])) + f", ... {values[-1]}"


class LayoutError(ValueError):
    """A parallel layout that cannot work: raised before any collective is issued."""


class HardwareError(LayoutError):
    """A layout that is valid but needs hardware this machine lacks (megatron-sp without CUDA).
    A run refuses it like any :class:`LayoutError`; a check of a config meant for other machines
    (``vfm train --validate`` on a login node) reports :meth:`note` instead."""

    def __init__(self, message: str, *, subject: str, needs: str) -> None:
        super().__init__(message)
        self.subject = subject  # what needs it: "megatron-sp"
        self.needs = needs  # what this machine lacks: "CUDA"

    def __reduce__(self):  # rebuilt from its fields, so it crosses processes (Ray workers, spawn)
        return _rebuild_hardware_error, (str(self), self.subject, self.needs)

    def note(self) -> str:
        return (f"{self.subject} needs {self.needs}, which this machine lacks; the config is valid for a "
                f"{self.needs} machine")


def _rebuild_hardware_error(message: str, subject: str, needs: str) -> HardwareError:
    return HardwareError(message, subject=subject, needs=needs)


@dataclass(frozen=True)
class ParallelDims:
    """Sizes of the five mesh dimensions; their product is the world size."""

    pp: int = 1
    dp_replicate: int = 1
    dp_shard: int = 1
    cp: int = 1
    tp: int = 1

    def __post_init__(self) -> None:
        bad = {f.name: getattr(self, f.name) for f in fields(self) if not (isinstance(getattr(self, f.name), int) and getattr(self, f.name) >= 1)}
        if bad:
            raise LayoutError(f"every parallel size must be an integer >= 1; got {bad}")

    @property
    def world_size(self) -> int:
        return self.pp * self.dp_replicate * self.dp_shard * self.cp * self.tp

    @property
    def dp(self) -> int:
        """Data-parallel degree: ranks that see different samples."""
        return self.dp_replicate * self.dp_shard

    def sizes(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in MESH_DIMS)

    @property
    def data_parallel_strategy(self) -> str:
        """The data-parallel strategy vfm picks when a config names none ('' when no rank shares
        the model): ``ddp`` only for a plain replica; with TP or PP, ``dp_replicate > 1`` takes
        ``hsdp`` (with ``dp_shard = cp = 1`` it shards over nothing and replicates as DDP does),
        because DDP takes neither TP's DTensor parameters nor a pipeline's backward per microbatch."""
        if self.dp_replicate > 1:
            plain = self.dp_shard == 1 and self.tp == 1 and self.pp == 1
            return "ddp" if plain else "hsdp"
        return "fsdp" if self.dp_shard * self.cp > 1 else ""

    def __str__(self) -> str:
        return "x".join(f"{name}{getattr(self, name)}" for name in MESH_DIMS if getattr(self, name) > 1) or "single"

    def validate(self, world_size: int, plan: Any = None, tokens: int | None = None) -> None:
        """Raise :class:`LayoutError` naming the numbers that disagree.

        ``plan`` (a family's ``ParallelPlan``) adds the model checks: heads % tp, kv-heads % tp,
        layers % pp (and layers >= pp); ``tokens`` (sequence length) adds tokens % cp.
        """
        problems: list[str] = []
        accepted: list[str] = []
        if self.world_size != world_size:
            problems.append(
                f"pp*dp_replicate*dp_shard*cp*tp = {self.pp}*{self.dp_replicate}*{self.dp_shard}*{self.cp}*{self.tp}"
                f" = {self.world_size} but the world size is {world_size}"
            )
            accepted.append(f"sizes whose product is {world_size} (parallel.dp_shard = -1 fills what the others leave), "
                            f"or {self.world_size} processes (torchrun --nproc-per-node {self.world_size})")
        if plan is not None:
            heads, kv_heads, layers = plan.num_heads, plan.num_kv_heads, plan.num_layers
            if heads % self.tp:
                problems.append(f"num_heads {heads} is not divisible by tp {self.tp}")
            if kv_heads % self.tp:
                problems.append(f"num_kv_heads {kv_heads} is not divisible by tp {self.tp}")
            if heads % self.tp or kv_heads % self.tp:
                accepted.append("tp " + _listed(d for d in divisors(heads) if kv_heads % d == 0))
            if layers % self.pp:
                problems.append(f"num_layers {layers} is not divisible by pp {self.pp}")
                accepted.append("pp " + _listed(divisors(layers)))
        if tokens is not None and tokens % self.cp:
            problems.append(f"sequence length {tokens} tokens is not divisible by cp {self.cp}")
            accepted.append("cp " + _listed(divisors(tokens)))
        if problems:
            raise LayoutError(f"parallel layout {self} does not fit: " + "; ".join(problems)
                              + "; accepted: " + "; ".join(accepted))

    def build_mesh(self, device_type: str = "cpu"):
        """The :class:`DeviceMesh` over all five dimensions (size-1 ones included, so every
        strategy can ask for ``mesh[name]``), plus the flattened ``"dp"`` (replicate x shard),
        ``"dp_shard_cp"`` (the ranks over which FSDP shards) and ``"dp_cp"`` (the ranks over which
        gradients are averaged): take those with :func:`flat_mesh`."""
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if not dist.is_initialized():
            raise LayoutError("torch.distributed is not initialised: call init_process_group first")
        self.validate(dist.get_world_size())
        mesh = init_device_mesh(device_type, self.sizes(), mesh_dim_names=MESH_DIMS)
        for name in FLAT_DIMS:  # every rank makes their process groups here, in the same order
            flat_mesh(mesh, name)
        return mesh


def flat_mesh(mesh, name: str):
    """The 1-D mesh of the flattened dimension ``name`` (``dp``, ``dp_shard_cp``, ``dp_cp``) of a
    :meth:`ParallelDims.build_mesh` mesh, with the process group ``build_mesh`` made for it.

    Use it instead of ``mesh["dp_cp"]``: torch (2.11 on) warns on every rank that slicing a
    flattened dimension from the root mesh is deprecated and will be refused. ``_flatten`` of an
    existing name returns the mesh torch keeps for it, so no new communicator is made; on a mesh
    built elsewhere it makes that one once (every rank must then call it, as with any new group).
    """
    if name not in FLAT_DIMS:
        raise KeyError(f"unknown flattened mesh dimension {name!r}; accepted: {', '.join(FLAT_DIMS)}")
    return mesh[FLAT_DIMS[name]]._flatten(name)


def hsdp_mesh(mesh):
    """The 2-D ``(dp_replicate, dp_shard_cp)`` mesh HSDP replicates and shards over, made of the
    meshes' existing process groups, as torch's own ``fully_shard(dp_mesh_dims=...)`` builds it
    (``mesh["dp_replicate", "dp_shard_cp"]`` slices a flattened dimension from the root: deprecated).
    Torch before 2.10 has no ``DeviceMesh._concatenate`` (nor that deprecation): there the slice is
    the way, and it gives the same mesh."""
    from torch.distributed.device_mesh import DeviceMesh

    concatenate = getattr(DeviceMesh, "_concatenate", None)
    if concatenate is None:
        return mesh["dp_replicate", "dp_shard_cp"]
    return concatenate([mesh["dp_replicate"], flat_mesh(mesh, "dp_shard_cp")])
