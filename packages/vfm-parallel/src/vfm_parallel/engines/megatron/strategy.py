"""``megatron-tp`` / ``megatron-sp``: the TP/SP strategy of :mod:`vfm_parallel.strategies.tensor_parallel`
with megatron-core's parallel linears in place of DTensor plans.

Each linear named in the family's ``plan.tp`` is swapped for a megatron ``ColumnParallelLinear``
(colwise) or ``RowParallelLinear`` (rowwise) over the mesh's TP group, its weights copied shard-wise
from the original. megatron-core's ``parallel_state`` is initialised over the same world (TP
innermost, as in our mesh) and checked to have the same TP groups.

``megatron-sp`` adds megatron's sequence parallelism: the residual stream between TP regions keeps
S/tp tokens per rank (the block split/gather and conditioning hooks are the ``sp`` strategy's);
inside a region megatron's column linear all-gathers the sequence and its row linear
reduce-scatters it (sequence-first inside the linears only). megatron-core 0.16 allocates those
communication buffers on ``torch.cuda.current_device()``, so ``megatron-sp`` needs CUDA; ``megatron-tp``
runs anywhere (CPU with gloo included).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from vfm_parallel import grad_sync
from vfm_parallel._modules import blocks_of, parent_path, submodule
from vfm_parallel.dims import HardwareError, LayoutError
from vfm_parallel.strategies.tensor_parallel import TensorParallel, _enter_block, _leave_stack

INSTALL = "pip install 'vfm-parallel[megatron]'"


def _layers():
    """:mod:`.layers` (imports megatron-core); a clear error when the extra is not installed."""
    try:
        from vfm_parallel.engines.megatron import layers
    except ImportError as error:
        if (error.name or "").split(".")[0] != "megatron":
            raise
        raise ImportError(f"the megatron engine needs megatron-core, which is not installed: {INSTALL}") from error
    return layers


class MegatronTensorParallel(TensorParallel):
    """``megatron-tp`` (``sp=False``) and ``megatron-sp`` (``sp=True``): the ``tp``/``sp`` strategy
    (same phase, mesh dimension and block hooks) with megatron linears; no options."""

    def __init__(self, sp: bool = False) -> None:
        super().__init__(sp)
        self.name = "megatron-sp" if sp else "megatron-tp"

    def check(self, dims: Any, plan: Any = None) -> None:
        """Before anything starts (``vfm_parallel.check_strategies``, so ``vfm train --validate`` and
        every rank's config check): the ``tp``/``sp`` checks, and megatron-sp with tp > 1 needs CUDA
        (a :class:`HardwareError`, last: ``--validate`` notes it and the config may still be fine)."""
        super().check(dims, plan)
        if self.sp and dims.tp > 1:
            _check_cuda_for_sp()

    def apply(self, model: nn.Module, mesh: Any, plan: Any, **options: Any) -> nn.Module:
        layers = _layers()  # a missing megatron-core is reported before anything else
        regions = self.regions(mesh, plan, options)
        if regions is None:
            return model
        tp_mesh = mesh["tp"]
        if self.sp:
            _check_sp_buffers(mesh.device_type)
        group = tp_mesh.get_group()
        _init_parallel_state(layers.parallel_state, mesh, group)
        blocks = blocks_of(model, plan)
        partial: list[str] = []  # replicated params whose grads are per-rank partial sums
        for index, block in enumerate(blocks):
            slots = {region: layers.SequenceSlot() for region in regions} if self.sp else {}
            row_biases = self._swap_linears(layers, block, plan.tp, tp_mesh.size(), group, slots)
            prefix = f"{plan.blocks}.{index}."
            for name, param in block.named_parameters():
                if getattr(param, "tensor_model_parallel", False):
                    continue  # a megatron shard: its gradient is complete
                if id(param) in row_biases:
                    # added after the all-reduce (whole on every rank) or the reduce-scatter (partial)
                    if self.sp:
                        partial.append(prefix + name)
                    continue
                inside_region = any(region and name.startswith(region + ".") for region in regions)
                if self.sp or inside_region:
                    partial.append(prefix + name)
            if self.sp:
                for region, slot in slots.items():
                    module = submodule(block, region)
                    module.register_forward_pre_hook(_hold_input(slot))
                    module.register_forward_hook(_release_input(slot))
                block.register_forward_pre_hook(_enter_block(group, split=index == 0), with_kwargs=True)
                if index == len(blocks) - 1:
                    block.register_forward_hook(_leave_stack(group))
        if partial:
            grad_sync.add(model, lambda m: grad_sync.all_reduce_grads(m, partial, group, f"{self.name}.replicated"))
        return model

    def _swap_linears(self, layers, block: nn.Module, tp_plan: dict, tp: int, group, slots: dict) -> set[int]:
        """Replace the block's plan.tp linears by megatron ones; the ids of the row biases."""
        row_biases: set[int] = set()
        for path, kind in tp_plan.items():
            linear = submodule(block, path)
            if not isinstance(linear, nn.Linear):
                raise TypeError(f"{self.name}: plan.tp path {path!r} is a {type(linear).__name__}, not nn.Linear")
            config = layers.config_for(linear, tp, self.sp)
            region = parent_path(path)
            if kind == "colwise":
                new = layers.ColumnLinear(linear, config, group, slots.get(region))
            else:
                new = layers.RowLinear(linear, config, group)
                if new.bias is not None:
                    row_biases.add(id(new.bias))
            setattr(submodule(block, region) if region else block, path.rpartition(".")[2], new)
        return row_biases


def _hold_input(slot):
    def hook(module, args):
        slot.tensor = args[0]

    return hook


def _release_input(slot):
    def hook(module, args, output):
        slot.tensor = None

    return hook


def _check_cuda_for_sp() -> None:
    """One line (:class:`HardwareError`) where ``torch.cuda.current_device()`` fails (a CPU-only torch,
    no GPU or driver): megatron-core's SP collectives allocate their buffers there, and without this
    check the first forward of every rank ended in a traceback from megatron-core."""
    try:
        torch.cuda.current_device()
    except (AssertionError, RuntimeError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise HardwareError(
            "megatron-sp: megatron-core's sequence-parallel layers need CUDA (they allocate their all-gather/"
            f"reduce-scatter buffers on torch.cuda.current_device(), which fails here: {reason}); "
            "without CUDA use vfm's 'sp' (or 'tp'), or 'megatron-tp'",
            subject="megatron-sp", needs="CUDA",
        ) from None


def _check_sp_buffers(device_type: str) -> None:
    """megatron-core's SP collectives allocate their buffers on ``torch.cuda.current_device()``
    (``utils.GlobalMemoryBuffer``, ``tensor_parallel/mappings.py``, the linears' backward): refuse,
    before any collective, where that fails or is not the mesh's device type."""
    try:
        device = torch.device(torch.cuda.current_device())
    except (AssertionError, RuntimeError) as error:
        raise RuntimeError(
            "megatron-sp: megatron-core allocates its sequence-parallel all-gather/reduce-scatter buffers on "
            f"torch.cuda.current_device(), which fails here ({error}); use 'sp' (DTensor) or 'megatron-tp' without CUDA"
        ) from error
    if device.type != device_type:
        raise RuntimeError(f"megatron-sp: megatron-core would put its sequence-parallel buffers on {device} "
                           f"but the mesh is on {device_type!r}")


def _init_parallel_state(parallel_state, mesh: Any, group) -> None:
    """Initialise megatron-core's ``parallel_state`` over this world (once per process) and check
    that its TP group is the mesh's (both put TP innermost; megatron's order is tp-cp-ep-dp-pp)."""
    tp = mesh["tp"].size()
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp,
                                                 pipeline_model_parallel_size=mesh["pp"].size(),
                                                 context_parallel_size=mesh["cp"].size())
    theirs = dist.get_process_group_ranks(parallel_state.get_tensor_model_parallel_group())
    ours = dist.get_process_group_ranks(group)
    if theirs != ours:
        raise LayoutError(f"megatron-core's parallel_state has TP ranks {theirs} but this mesh's TP group is {ours}; "
                          "call megatron.core.parallel_state.destroy_model_parallel() before changing the layout")


def megatron_tp() -> MegatronTensorParallel:
    return MegatronTensorParallel(sp=False)


def megatron_sp() -> MegatronTensorParallel:
    return MegatronTensorParallel(sp=True)
