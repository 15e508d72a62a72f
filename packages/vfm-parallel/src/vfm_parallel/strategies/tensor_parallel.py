"""Tensor parallelism (Megatron column/row pairs as DTensor plans) and sequence parallelism.

The family's ``plan.tp`` names the colwise/rowwise linears inside a block; the parent module of
those linears (``attn`` for ``attn.q``) is a *TP region*: inside it activations are split by heads
(or by MLP hidden units). With ``sp`` the residual stream between regions (norms, AdaLN modulation,
residual adds) holds only ``S/tp`` tokens per rank: each region all-gathers the sequence on entry
and its rowwise linear reduce-scatters on exit; the first block splits the sequence and the last
block gathers it back, so embed and head run on the whole sequence as before.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from vfm_parallel import grad_sync
from vfm_parallel._modules import blocks_of, parent_path, submodule
from vfm_parallel.strategies.seq_ops import GatherSequence, ReduceGradients, SplitSequence


def _is_dtensor(p) -> bool:
    return hasattr(p, "device_mesh") and hasattr(p, "to_local")


class TensorParallel:
    """``tp``: shard each block's linears by ``plan.tp``; ``sp=True`` (the ``sp`` strategy) adds
    sequence parallelism in the norm/residual regions."""

    phase = "tp"
    mesh_dims = ("tp",)

    def __init__(self, sp: bool = False) -> None:
        self.sp = sp
        self.name = "sp" if sp else "tp"

    def check(self, dims: Any, plan: Any = None) -> None:
        """Before anything starts (``vfm_parallel.check_strategies``): the family must name TP linears."""
        from vfm_parallel.dims import LayoutError

        if dims.tp > 1 and plan is not None and not plan.tp:
            raise LayoutError(f"{self.name}: this model's parallel plan names no colwise/rowwise linears, so it "
                              f"does not support tensor parallelism; use tp = 1")
        if self.sp and dims.tp > 1 and dims.cp > 1:  # SP splits the sequence CP's hooks expect whole
            raise LayoutError(f"sp does not combine with context parallelism (tp {dims.tp}, cp {dims.cp}); "
                              f"with cp use tp (strategies = [\"tp\", \"cp-ring\", ...]), or sp with cp = 1")

    def check_tokens(self, dims: Any, tokens: int) -> None:
        """Before anything starts (``check_strategies(..., tokens=S)``): SP keeps S/tp tokens per rank, so
        tp must divide every sequence the model takes; else the first forward fails on every rank."""
        from vfm_parallel.dims import LayoutError, _listed, divisors

        if self.sp and dims.tp > 1 and tokens % dims.tp:
            whole = self.name[: -len("sp")] + "tp"  # sp -> tp, megatron-sp -> megatron-tp
            raise LayoutError(f"{self.name} splits each sequence over tp = {dims.tp} ranks, but a sequence of {tokens} "
                              f"tokens does not divide by {dims.tp}; accepted: tp {_listed(divisors(tokens))} (dividing "
                              f"{tokens}), or the strategy {whole} instead of {self.name} (every rank keeps the whole "
                              "sequence)")

    def regions(self, mesh: Any, plan: Any, options: dict) -> list[str] | None:
        """The block sub-modules that hold the plan's TP linears; None when tp is 1 (nothing to do).
        Raises on options (none are taken) and on plans that TP/SP cannot apply to."""
        if options:
            raise TypeError(f"{self.name} takes no options; got {', '.join(options)}")
        if mesh["tp"].size() == 1:
            return None
        if not plan.tp:
            raise ValueError(f"{self.name}: the model's plan names no colwise/rowwise linears (plan.tp is empty)")
        regions = sorted({parent_path(path) for path in plan.tp})
        if self.sp and "" in regions:
            raise ValueError(f"{self.name} needs the TP linears grouped in sub-modules of the block (e.g. 'attn.q'); "
                             f"got top-level paths {[p for p in plan.tp if '.' not in p]}")
        return regions

    def apply(self, model: nn.Module, mesh: Any, plan: Any, **options: Any) -> nn.Module:
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        regions = self.regions(mesh, plan, options)
        if regions is None:
            return model
        tp_mesh = mesh["tp"]
        group = tp_mesh.get_group()
        blocks = blocks_of(model, plan)
        styles = {
            path: ColwiseParallel() if kind == "colwise"
            else RowwiseParallel(output_layouts=Shard(1) if self.sp else Replicate())
            for path, kind in plan.tp.items()
        }
        partial: list[str] = []  # replicated params whose grads are per-rank partial sums
        for index, block in enumerate(blocks):
            parallelize_module(block, tp_mesh, styles)
            prefix = f"{plan.blocks}.{index}."
            for name, param in block.named_parameters():
                if _is_dtensor(param):
                    continue  # DTensor autograd reduces these itself
                inside_region = any(region and name.startswith(region + ".") for region in regions)
                if self.sp or inside_region:
                    partial.append(prefix + name)
            if self.sp:
                for region in regions:
                    submodule(block, region).register_forward_pre_hook(_gather_first_arg(group))
                block.register_forward_pre_hook(
                    _enter_block(group, split=index == 0), with_kwargs=True
                )
                if index == len(blocks) - 1:
                    block.register_forward_hook(_leave_stack(group))
        if partial:
            grad_sync.add(model, lambda m: grad_sync.all_reduce_grads(m, partial, group, f"{self.name}.replicated"))
        return model


def _gather_first_arg(group):
    def hook(module, args):
        return (GatherSequence.apply(args[0], group, "sp.region"), *args[1:])

    return hook


def _enter_block(group, split: bool):
    """Per block: the conditioning tensors get their gradient summed over TP (each rank used them
    on its own tokens only); the first block also splits the sequence."""

    def hook(module, args, kwargs):
        args = list(args)
        ctx = args[1] if len(args) > 1 else kwargs["ctx"]
        changes = {}
        for field in ("c", "mod"):
            value = getattr(ctx, field, None)
            if value is not None:
                if value.dim() != 2:
                    raise NotImplementedError("sp with per-token conditioning (packed batches) is not supported")
                changes[field] = ReduceGradients.apply(value, group, "sp.conditioning")
        ctx = ctx.replace(**changes) if changes else ctx
        if len(args) > 1:
            args[1] = ctx
        else:
            kwargs["ctx"] = ctx
        if split:
            args[0] = SplitSequence.apply(args[0], group, "sp.stack")
        return tuple(args), kwargs

    return hook


def _leave_stack(group):
    def hook(module, args, output):
        return GatherSequence.apply(output, group, "sp.stack")

    return hook


def tp() -> TensorParallel:
    return TensorParallel(sp=False)


def sp() -> TensorParallel:
    return TensorParallel(sp=True)
