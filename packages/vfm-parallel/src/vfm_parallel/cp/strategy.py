"""The context-parallel strategies ``cp-ring``, ``cp-ulysses`` and ``cp-hybrid``.

``apply`` swaps every attention core the plan names for a :class:`ContextParallelCore`, cuts the
token sequence into cp contiguous chunks in front of the first block (tokens and the per-token
fields of the block context, through ``ctx.map_tokens``), and all-gathers it after the last block,
so ``model.head`` sees the whole sequence. Every rank then computes the same loss; each parameter's
gradient is this rank's share, and the average over the cp ranks (done by DDP/FSDP over ``dp_cp``,
or by ``pm.sync_grads()``) is the single-process gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch.distributed as dist
from torch import nn

from vfm_parallel.cp.comm import all_gather_seq
from vfm_parallel.cp.cores import ContextParallelCore
from vfm_parallel.cp.groups import check_groups
from vfm_parallel.cp.masks import grid_tokens, grids_of
from vfm_parallel.cp.ulysses import check_heads


def cp_group(mesh: Any) -> dist.ProcessGroup:
    """The CP process group of ``mesh``: its ``"cp"`` dimension, a 1-D mesh, or a ProcessGroup."""
    if isinstance(mesh, dist.ProcessGroup):
        return mesh
    names = getattr(mesh, "mesh_dim_names", None) or ()
    if "cp" in names:
        return mesh["cp"].get_group()
    if getattr(mesh, "ndim", None) == 1:
        return mesh.get_group()
    raise ValueError(f"context parallelism needs a mesh with a 'cp' dimension, a 1-D mesh or a ProcessGroup; got dims {names}")


def _resolve(root: nn.Module, path: str) -> nn.Module:
    return root.get_submodule(path) if path else root


def _attention_for(plan: Any, index: int) -> dict:
    """Core path -> kind in block ``index``: the plan's per-block overrides (ST-DiT blocks with full
    attention) applied to ``plan.attention``."""
    if hasattr(plan, "attention_for"):
        return dict(plan.attention_for(index))
    return dict(plan.attention)


def _kinds_of(plan: Any) -> set[str]:
    """Every attention kind in the plan's blocks."""
    return {k for i in range(plan.num_layers) for k in _attention_for(plan, i).values()}


def _check_dealing(grouped_kinds: list[str], batch: int, grid: tuple[int, int, int], cp: int) -> None:
    for kind in grouped_kinds:
        check_groups(kind, batch, grid, cp)


def _replace(root: nn.Module, path: str, new: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(_resolve(root, parent), name, new)


@dataclass(frozen=True)
class ContextParallel:
    """A CP strategy: which method (ring, ulysses, group, local) serves each attention kind."""

    name: str
    methods: Mapping[str, str]
    description: str = ""
    phase: str = "cp"
    mesh_dims: tuple[str, ...] = ("cp",)

    def check(self, dims: Any, plan: Any = None) -> None:
        """Before anything starts (``vfm_parallel.check_strategies``): every attention kind of the
        model has a method here, and all-to-all (Ulysses) has the heads of a TP rank to split over cp."""
        from vfm_parallel.dims import LayoutError

        if dims.cp == 1 or plan is None:
            return
        kinds = _kinds_of(plan)
        unknown = sorted(kinds - set(self.methods))
        if unknown:
            raise LayoutError(f"{self.name} has no method for this model's {', '.join(unknown)} attention; "
                              f"it serves {', '.join(self.methods)}")
        if any(self.methods[k] == "ulysses" for k in kinds):
            heads = plan.num_heads // dims.tp
            if heads % dims.cp:
                fits = [c for c in range(2, heads + 1) if heads % c == 0]
                raise LayoutError(f"{self.name} splits the attention heads over cp: {heads} heads per TP rank "
                                  f"(num_heads {plan.num_heads} / tp {dims.tp}) are not divisible by cp {dims.cp}; "
                                  f"accepted cp: {', '.join(map(str, fits)) or 'none'}, or use cp-ring")

    def grouped_kinds(self, plan: Any) -> list[str]:
        """The attention kinds of ``plan`` this strategy deals to the ranks as whole groups (all-to-all)."""
        return sorted(k for k in _kinds_of(plan) if self.methods.get(k) == "group")

    def check_batch(self, plan: Any, batch: int, grid: tuple[int, int, int], cp: int) -> None:
        """Raise ValueError when the groups of a ``batch``-sample forward over ``grid`` (T', H', W') cannot
        be dealt evenly to ``cp`` ranks: the one check of cp-hybrid's layout, run by the strategy on
        every forward and, before any process starts, by ``vfm train --validate`` and ``vfm generate``."""
        _check_dealing(self.grouped_kinds(plan), batch, grid, cp)

    def apply(self, model: nn.Module, mesh: Any, plan: Any, *, average_gradients: bool = True) -> nn.Module:
        """Make ``model`` context-parallel over ``mesh``'s cp group, in place; returns it.

        ``average_gradients``: average each parameter's gradient over the cp ranks when
        ``pm.sync_grads()`` runs (False saves that all-reduce when DDP/FSDP average over ``dp_cp``).
        """
        group = cp_group(mesh)
        cp = dist.get_world_size(group)
        if cp == 1:
            return model
        blocks = _resolve(model, plan.blocks)
        if len(blocks) == 0:
            raise ValueError(f"plan.blocks {plan.blocks!r} holds no blocks to make context-parallel")
        per_block = [_attention_for(plan, i) for i in range(len(blocks))]
        kinds = {k for block_kinds in per_block for k in block_kinds.values()}
        unknown = sorted(kinds - set(self.methods))
        if unknown:
            raise ValueError(f"{self.name} has no method for attention {unknown}; kinds it serves: {', '.join(self.methods)}")
        if any(self.methods[k] == "ulysses" for k in kinds):
            check_heads(plan.num_heads, plan.num_kv_heads, cp)
        for block, block_kinds in zip(blocks, per_block):
            for path, kind in block_kinds.items():
                inner = _resolve(block, path)
                if isinstance(inner, ContextParallelCore):
                    raise ValueError(f"{path} is already context-parallel ({inner.method}); apply one CP strategy once")
                if getattr(inner, "kind", kind) != kind:
                    raise ValueError(f"the plan says {path} is {kind} attention but its core is {inner.kind!r}")
                _replace(block, path, ContextParallelCore(inner, kind, group, self.methods[kind]))
        sharding = _SequenceSharding(group, self.grouped_kinds(plan))
        blocks[0].register_forward_pre_hook(sharding.shard_first, with_kwargs=True)
        for block in list(blocks)[1:]:
            block.register_forward_pre_hook(sharding.shard_context, with_kwargs=True)
        blocks[len(blocks) - 1].register_forward_hook(sharding.gather_last)
        if average_gradients:
            _average_gradients_over(model, group)
        return model


class _SequenceSharding:
    """Forward hooks that cut the sequence before the first block and join it after the last."""

    def __init__(self, group, grouped_kinds: list[str]):
        self.group, self.grouped_kinds = group, grouped_kinds  # the plan's, read once (not per forward)
        self.rank, self.cp = dist.get_rank(group), dist.get_world_size(group)
        self._ctx: tuple[Any, Any] | None = None  # (the model's context, its shard) of this forward

    def _validate(self, batch: int, tokens: int, ctx) -> None:
        """Every check that can fail, before this forward issues any collective."""
        grid = getattr(ctx, "grid", None)
        if getattr(ctx, "cu_seqlens", None) is not None and self.grouped_kinds:
            raise ValueError(
                f"{'/'.join(self.grouped_kinds)} attention by all-to-all (cp-hybrid) does not take packed "
                "batches (cu_seqlens); use cp-ring or cp-ulysses for packed sequences"
            )
        where = f" (grid {tuple(grid)})" if grid is not None else ""
        if tokens % self.cp:
            raise ValueError(
                f"context parallelism cuts the sequence into cp={self.cp} equal chunks, but it has {tokens} tokens"
                f"{where} and {tokens} % {self.cp} = {tokens % self.cp}; use a token count divisible by {self.cp}"
            )
        if grid is not None and grid_tokens(grid) != tokens:
            raise ValueError(f"the block context's grid {tuple(grid)} has {grid_tokens(grid)} tokens but the sequence has {tokens}")
        if grid is not None and len(grids_of(grid)) == 1:  # packed batches are refused by the core itself
            _check_dealing(self.grouped_kinds, batch, grids_of(grid)[0], self.cp)  # as check_batch

    def _narrow(self, tensor, dim: int):
        n = tensor.shape[dim]
        if n % self.cp:
            raise ValueError(f"a per-token context field has {n} entries along dim {dim}, not divisible by cp={self.cp}")
        return tensor.narrow(dim, self.rank * (n // self.cp), n // self.cp)

    def _shard_ctx(self, ctx):
        if self._ctx is not None and ctx is self._ctx[0]:
            return self._ctx[1]
        if self._ctx is not None and ctx is self._ctx[1]:
            return ctx
        sharded = ctx.map_tokens(self._narrow)
        self._ctx = (ctx, sharded)
        return sharded

    @staticmethod
    def _split(args, kwargs):
        tokens = args[0] if args else kwargs["tokens"]
        ctx = args[1] if len(args) > 1 else kwargs.get("ctx")
        return tokens, ctx

    @staticmethod
    def _join(args, kwargs, tokens, ctx):
        args, kwargs = list(args), dict(kwargs)
        if args:
            args[0] = tokens
        else:
            kwargs["tokens"] = tokens
        if ctx is not None:
            if len(args) > 1:
                args[1] = ctx
            else:
                kwargs["ctx"] = ctx
        return tuple(args), kwargs

    def shard_first(self, module, args, kwargs):
        tokens, ctx = self._split(args, kwargs)  # (B, S, D)
        self._validate(tokens.shape[0], tokens.shape[1], ctx)
        self._ctx = None  # a new forward: forget the previous context
        shard = tokens.narrow(1, self.rank * (tokens.shape[1] // self.cp), tokens.shape[1] // self.cp)
        return self._join(args, kwargs, shard, None if ctx is None else self._shard_ctx(ctx))

    def shard_context(self, module, args, kwargs):
        tokens, ctx = self._split(args, kwargs)
        return None if ctx is None else self._join(args, kwargs, tokens, self._shard_ctx(ctx))

    def gather_last(self, module, args, output):
        return all_gather_seq(output, 1, self.group, "cp.sequence")  # (B, S/cp, D) -> (B, S, D)


def _average_gradients_over(model: nn.Module, group) -> None:
    """On ``pm.sync_grads()`` (``grad_sync.run``), replace each gradient by its mean over ``group``.

    Parameters that FSDP/HSDP shard over a mesh with the cp ranks in it (``dp_shard_cp``, alone or
    with ``tp``) are skipped: their gradients are already averaged over cp. Tensor-parallel DTensors
    (a ``tp`` mesh only) are not: each cp rank holds the gradient of its own share of the sequence,
    so they are averaged here like plain tensors (their local shards: the cp ranks of one tp
    coordinate hold the same shard). Under DDP (which averages over ``dp_cp``) this is a redundant
    but harmless second mean of equal values.
    """
    from vfm_parallel import grad_sync

    size = dist.get_world_size(group)

    def average(module: nn.Module) -> None:
        params = [(n, p) for n, p in module.named_parameters() if p.requires_grad and not _averaged_over_cp(p)]
        grad_sync.all_reduce_grads(module, [n for n, _ in params], group, "cp.gradients")
        for _, p in params:
            if p.grad is not None:
                p.grad.div_(size)

    grad_sync.add(model, average)


def _averaged_over_cp(param) -> bool:
    """A DTensor sharded by FSDP/HSDP over a mesh dimension that holds the cp ranks (``dp_shard_cp``,
    ``dp_cp``): its gradient is reduce-scattered, so averaged, over cp already."""
    mesh = getattr(param, "device_mesh", None)
    names = getattr(mesh, "mesh_dim_names", None) or ()
    return any("cp" in name.split("_") for name in names)


RING = ContextParallel(
    "cp-ring",
    {"full": "ring", "spatial": "ring", "temporal": "ring", "cross": "local"},
    "context parallelism with ring attention over P2P for every self-attention",
)
ULYSSES = ContextParallel(
    "cp-ulysses",
    {"full": "ulysses", "spatial": "ulysses", "temporal": "ulysses", "cross": "local"},
    "context parallelism with all-to-all (Ulysses) head/sequence exchange for every self-attention",
)
HYBRID = ContextParallel(
    "cp-hybrid",
    {"full": "ring", "spatial": "group", "temporal": "group", "cross": "local"},
    "ST-DiT hybrid: all-to-all + local attention for spatial/temporal, ring over P2P for full attention",
)
