"""Ranks for generation under torchrun: CFG-parallel pairs times context-parallel groups.

World = (2 if CFG-parallel else 1) x cp. The layout is the vfm-parallel mesh with ``dp_replicate``
holding the two guidance branches and ``cp`` the sequence shards, so rank = branch * cp + cp_rank.
Every rank steps the same latents; rank 0 decodes and writes.
"""

from __future__ import annotations

from vfm_parallel.process_group import env_world_size, init_distributed


def layout_sizes(world: int, cfg_parallel: bool) -> tuple[int, int]:
    """(cfg ranks, cp ranks) for ``world`` processes; raises when they do not fit."""
    cfg = 2 if cfg_parallel else 1
    if world % cfg:
        raise ValueError(f"CFG-parallel needs an even number of processes (its two guidance branches on two ranks: "
                         f"torchrun --nproc-per-node 2 -m vfm_cli.main generate ...); got {world}")
    return cfg, world // cfg


def check_cfg_parallel(pipe, prepared) -> None:
    """CFG-parallel puts the two guidance branches on two ranks: refuse a request with one branch."""
    if pipe.conditioner.kind == "none":
        raise ValueError("CFG-parallel needs a conditional model; this one is unconditional (no guidance): "
                         "leave out --cfg-parallel, every rank then shares the tokens (context parallelism)")
    scale = prepared.spec.guidance
    if scale in (0.0, 1.0):
        which, why = (("conditional", " (also the default of an export trained without condition dropout)")
                      if scale == 1.0 else ("unconditional", ""))
        raise ValueError(f"CFG-parallel runs the conditional and unconditional branches on two ranks, but at guidance "
                         f"{scale:g}{why} only the {which} one runs and its partner rank would idle; leave out "
                         "--cfg-parallel (every rank then shares the tokens) or give a --guidance other than 0 and 1")


def setup_inference(pipe, prepared, *, cfg_parallel: bool = False, cp_strategy: str = "cp-ring") -> int:
    """Configure ``pipe.parallel`` for the current process group; returns this process's rank.

    Every check that can fail (the layout against the world size, CFG-parallel against the guidance,
    the token count and the strategy against the model) runs before the process group starts, so a
    request that cannot run fails alike on every rank instead of one rank failing inside a collective
    (a training checkpoint read under torchrun has started the group already, to be verified once
    between the ranks: these checks still fail alike on every rank, before any collective of generation)."""
    world = env_world_size()
    if world == 1:
        if cfg_parallel:
            raise ValueError("--cfg-parallel needs 2 processes or more (run under torchrun --nproc-per-node 2)")
        return 0
    cfg, cp = layout_sizes(world, cfg_parallel)
    if cfg_parallel:
        check_cfg_parallel(pipe, prepared)
    from vfm_infer.context_parallel import check_layout, context_parallel_model

    check_layout(pipe.model, prepared.latent_shape, cp, cp_strategy, pipe.forward_batch(prepared.spec, cfg_parallel))
    init_distributed(pipe.device.type)
    import torch.distributed as dist
    from vfm_parallel.dims import ParallelDims

    mesh = ParallelDims(dp_replicate=cfg, cp=cp).build_mesh(pipe.device.type)
    if cfg > 1:
        pipe.parallel.cfg_group = mesh["dp_replicate"].get_group()
    if cp > 1:
        pipe.parallel.model = context_parallel_model(pipe.model, mesh, cp_strategy)
    return dist.get_rank()
