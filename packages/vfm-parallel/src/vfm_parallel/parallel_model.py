"""``parallelize``: the single entry point that turns a family model and ``ParallelDims`` into
this rank's parallelized model (and the pipeline schedule when pp > 1), ready for the trainer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch
import torch.distributed as dist
from torch import nn

from vfm_parallel import grad_sync
from vfm_parallel.dims import MESH_DIMS, HardwareError, LayoutError, ParallelDims
from vfm_parallel.strategy import get_strategy, order_strategies

#: Which phase must be present when a mesh dimension has size > 1.
_DIM_PHASE = {"pp": "pp", "dp_replicate": "dp", "dp_shard": "dp", "cp": "cp", "tp": "tp"}


@dataclass
class ParallelModel:
    """What ``parallelize`` returns. ``model`` is what to call and optimize; ``inner`` the same
    model without a DDP wrapper; ``schedule`` the pipelining schedule when pp > 1."""

    model: nn.Module
    inner: nn.Module
    mesh: Any
    dims: ParallelDims
    plan: Any
    device_type: str
    strategies: list[str]
    schedule: Any = None
    stage_info: dict = field(default_factory=dict)

    def sync_grads(self) -> None:
        """The gradient reductions no wrapper performs (TP/SP partial sums, PP conditioning);
        call after backward (or ``pipeline_step``) and before the optimizer step."""
        grad_sync.run(self.inner)

    def pipeline_step(self, x: torch.Tensor, t: torch.Tensor, cond: Mapping[str, torch.Tensor],
                      target: torch.Tensor | None = None) -> torch.Tensor | None:
        """Forward + backward of one batch through the pipeline; every PP rank passes the same
        batch (the latent is needed on every stage for its patch grid). Returns the mean loss
        over microbatches on the last stage, None elsewhere."""
        if self.schedule is None:
            raise RuntimeError("pipeline_step needs pp > 1 and the 'pp' strategy")
        kwargs = {"x": x, "t": t, **cond}
        args = (x,) if self.stage_info["first"] else ()
        if not self.stage_info["last"]:
            self.schedule.step(*args, **kwargs)
            return None
        if target is None:
            raise ValueError("the last pipeline stage needs the target")
        losses: list[torch.Tensor] = []
        self.schedule.step(*args, target=target, losses=losses, **kwargs)
        return torch.stack([loss.detach() for loss in losses]).mean()


def check_strategies(dims: ParallelDims, strategies: Sequence[str], plan: Any = None, *,
                     hardware: list | None = None, tokens: int | None = None) -> list:
    """The strategies named, in application order, if they can run ``dims`` (and the model's
    ``plan``, when given); else :class:`LayoutError` naming the problem and what is accepted.

    What :func:`parallelize` checks before it applies anything, with no process group and no
    model weights (the plan of a meta-device model will do), so a launcher or a config check can
    refuse a layout before any rank starts: one strategy per phase, a strategy for every mesh
    dimension of size > 1, and each strategy's own ``check(dims, plan)`` when it has one (DDP with
    TP, Ulysses heads against cp, attention kinds a CP strategy cannot serve, TP without TP linears).

    ``hardware``: None (a run on this machine) raises every refusal; a list (a check of a config
    meant for other machines, ``vfm train --validate``) collects each :class:`HardwareError` (what
    this machine's hardware cannot run, e.g. megatron-sp without CUDA) in it and goes on checking.
    ``tokens``: a sequence length the model will take, checked by :func:`check_sequence`.
    """
    try:
        chosen = order_strategies([get_strategy(name) for name in strategies])
    except ValueError as exc:
        raise LayoutError(str(exc)) from None
    for dim in MESH_DIMS:
        size = getattr(dims, dim)
        if size > 1 and not any(s.phase == _DIM_PHASE[dim] and dim in s.mesh_dims for s in chosen):
            serving = _serving(_DIM_PHASE[dim], dim)
            raise LayoutError(f"{dim}={size} but no chosen strategy parallelizes over {dim!r}; chosen: "
                              f"{', '.join(strategies) or '(none)'}; add one of: {', '.join(serving)}")
    for strategy in chosen:
        check = getattr(strategy, "check", None)
        if check is None:
            continue
        try:
            check(dims, plan)
        except HardwareError as exc:
            if hardware is None:
                raise
            hardware.append(exc)
    if tokens is not None:
        check_sequence(dims, chosen, tokens)
    return chosen


def check_sequence(dims: ParallelDims, chosen: Sequence[Any], tokens: int) -> None:
    """Each of the ``chosen`` strategies (as :func:`check_strategies` returns them) that splits the
    sequence (``check_tokens(dims, tokens)``: sp, megatron-sp) against a sequence of ``tokens``; a
    caller with several sequence lengths (one per data bucket) calls it for each."""
    for strategy in chosen:
        check = getattr(strategy, "check_tokens", None)
        if check is not None:
            check(dims, tokens)


def idle_strategies(dims: ParallelDims, strategies: Sequence[str], notes: Mapping[str, str] | None = None) -> list[str]:
    """One line per strategy of ``strategies`` whose mesh dimensions all have size 1 (``tp`` with
    tp = 1, ``cp-ring`` with cp = 1, ``fsdp`` with dp_shard = cp = 1): it runs, over a group of one
    rank, and parallelizes nothing. Names the strategy, the dimensions and their sizes, and what to
    set; an unknown name is skipped (:func:`check_strategies` refuses it). ``notes[dim]`` follows
    that dimension's size (e.g. how ``dp_shard = -1`` became 1).

    A warning, not an error: one config is often shared by a 1-GPU run and an N-GPU run (``dp_shard
    = -1`` fills the world; ``vfm plan`` and ``--set`` change the sizes), and a strategy over a
    dimension of size 1 is harmless there; it is worth one line only because whoever listed it
    expected it to act.
    """
    lines = []
    for name in strategies:
        try:
            strategy = get_strategy(name)
        except Exception:  # unknown or broken: check_strategies says so
            continue
        mesh_dims = tuple(getattr(strategy, "mesh_dims", ()))
        if not mesh_dims or any(getattr(dims, dim) > 1 for dim in mesh_dims):
            continue
        sizes = " and ".join(f"parallel.{dim} = {getattr(dims, dim)}{' ' + notes[dim] if dim in (notes or {}) else ''}"
                             for dim in mesh_dims)
        lines.append(f"{sizes}, so strategy {name!r} parallelizes nothing; set parallel.{mesh_dims[0]} > 1 "
                     f"or drop {name!r} from parallel.strategies")
    return lines


def _serving(phase: str, dim: str) -> list[str]:
    """The registered strategies that parallelize over mesh dimension ``dim``."""
    from vfm_parallel.plugins import host

    names = []
    for name in host.names("strategies"):
        try:
            strategy = get_strategy(name)
        except Exception:  # a broken plugin is reported where it is chosen, not here
            continue
        if strategy.phase == phase and dim in strategy.mesh_dims:
            names.append(name)
    return names


class StrategyOptionError(ValueError):
    """An option the strategy named ``strategy`` does not take (see :func:`parallelize`)."""

    def __init__(self, strategy: str, message: str) -> None:
        super().__init__(message)
        self.strategy = strategy


def _check_options(strategy: Any, given: Mapping[str, Any]) -> None:
    """An option ``strategy.apply`` does not take is named with the ones it accepts, before any
    strategy runs (not ``apply() got an unexpected keyword argument`` half-way through)."""
    from functools import partial

    from vfm_plugins import unknown_options

    # the options are apply's parameters after model, mesh and plan
    unknown, accepted = unknown_options(partial(strategy.apply, None, None, None), given)
    if unknown:
        raise StrategyOptionError(strategy.name, f"strategy {strategy.name!r} has no option {', '.join(unknown)}; "
                                                 f"accepted: {', '.join(accepted) or '(none)'}")


def parallelize(model: nn.Module, dims: ParallelDims, strategies: Sequence[str] = (), *, mesh: Any = None,
                device_type: str = "cpu", tokens: int | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None) -> ParallelModel:
    """Apply ``strategies`` (registry names) to ``model`` over the mesh of ``dims``.

    Order (fixed, whatever the order of ``strategies``): pp split -> tp/sp -> cp -> activation
    checkpointing -> compile -> ddp/fsdp/hsdp. ``options[name]`` goes to that strategy's ``apply``.
    The layout is validated against the world size and the model (and ``tokens`` % cp, % tp for sp) before any
    collective; a mesh dimension of size > 1 that no chosen strategy uses is an error. Strategies
    without mesh dimensions (``compile``, ``ac``) need no process group and get ``mesh=None`` when
    none is given and none is needed.
    """
    options = dict(options or {})
    plan = model.parallel_plan()
    world = dist.get_world_size() if dist.is_initialized() else 1
    dims.validate(world, plan, tokens)
    chosen = check_strategies(dims, strategies, plan, tokens=tokens)
    unused = sorted(set(options) - {s.name for s in chosen})
    if unused:
        raise ValueError(f"options given for strategies not chosen: {', '.join(unused)}; chosen: {', '.join(strategies)}")
    for strategy in chosen:
        _check_options(strategy, options.get(strategy.name, {}))
    if mesh is None and any(s.mesh_dims for s in chosen):
        # Strategies over mesh dimensions need a process group; one plain process (python, or
        # torchrun with one rank) gets a single-rank group so they apply as on a cluster of one.
        from vfm_parallel.process_group import ensure_process_group

        ensure_process_group(device_type)
        mesh = dims.build_mesh(device_type)
    inner = model
    for strategy in chosen:
        model = strategy.apply(model, mesh, plan, **options.get(strategy.name, {}))
        if not isinstance(model, nn.Module):  # a plugin's apply that forgets `return model`, or returns more
            from vfm_parallel.plugins import host
            from vfm_plugins import PluginResultError

            entry = host.entry("strategies", strategy.name)
            returned = "None" if model is None else f"a {type(model).__name__}, not an nn.Module"
            raise PluginResultError(f"strategy {strategy.name!r} (from {entry.provider} {entry.version}): apply returned {returned}; "
                            "it must return the model (the one it was given, changed in place, or its wrapper)")
        if strategy.phase != "dp":
            inner = model
    pm = ParallelModel(model=model, inner=inner, mesh=mesh, dims=dims, plan=plan, device_type=device_type,
                       strategies=[s.name for s in chosen])
    for strategy in chosen:
        finalize = getattr(strategy, "finalize", None)
        if finalize is not None:
            finalize(pm)
    return pm
