"""Per-rank memory of a layout: parameter states under FSDP sharding, the FSDP working set,
activations with and without checkpointing, and the pipeline's in-flight microbatches.

All figures are bytes on the busiest rank (the first pipeline stage holds the most microbatches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from vfm_parallel.planner.layouts import Layout
from vfm_parallel.planner.model_spec import ModelSpec

#: Bytes per parameter kept by vfm's trainer: fp32 weights and gradients (bf16 is autocast, the
#: parameters stay fp32), AdamW's two fp32 moments, and the fp32 EMA copy.
STATE_BYTES = {"weights": 4, "grads": 4, "optimizer": 8, "ema": 4}
#: Blocks whose parameters FSDP holds unsharded at once (the current one and the prefetched next).
FSDP_LIVE_BLOCKS = 2
#: Bytes per token per hidden unit that a checkpointed block keeps: its input, the residual stream,
#: which is bf16 under autocast (the patch embedding's output already is).
CHECKPOINT_BYTES = 2
#: Bytes of one activation element (bf16 under autocast).
ACT_ELEMENT_BYTES = 2
#: Share of a block's activations that TP without sequence parallelism does not split (10 / 34).
NO_SP_UNSPLIT = 10 / 34


@dataclass(frozen=True)
class Memory:
    weights: float
    grads: float
    optimizer: float
    ema: float
    fsdp_working: float
    activations: float

    @property
    def states(self) -> float:
        return self.weights + self.grads + self.optimizer + self.ema

    @property
    def total(self) -> float:
        return self.states + self.fsdp_working + self.activations

    def as_gib(self) -> dict[str, float]:
        keys = ("weights", "grads", "optimizer", "ema", "fsdp_working", "activations", "total")
        return {k: significant(getattr(self, k) / 2**30, 3) for k in keys}


def significant(x: float, digits: int = 4) -> float:
    """``x`` rounded to at least one decimal and at least ``digits`` significant digits (two fixed
    decimals wrote a tiny model's GiB and TFLOP/s as 0.0)."""
    if not x:
        return 0.0
    return round(x, max(1, digits - 1 - math.floor(math.log10(abs(x)))))


def params_per_rank(spec: ModelSpec, layout: Layout) -> float:
    """Parameters a model-parallel rank owns before data-parallel sharding: split by TP and PP."""
    return spec.params / (layout.tp * layout.pp)


def activation_bytes(spec: ModelSpec, layout: Layout, overhead: float = 1.0) -> float:
    """Activations kept for backward on the first pipeline stage at its peak; ``overhead`` scales the
    count for what it leaves out (allocator fragmentation, framework temporaries)."""
    layers = spec.layers / layout.pp
    # tokens of one pipeline microbatch (= the micro-batch without PP) on this rank: CP splits the
    # sequence, SP splits it again between the TP regions (the regions' inside is split by heads/width)
    samples = layout.micro_batch / layout.n_micro
    tokens = samples * spec.seq_len / (layout.cp * layout.tp)
    per_block = spec.act_bytes_per_token * spec.hidden * tokens
    if layout.tp > 1 and not layout.sp:
        # without SP the norm/residual regions hold all S/cp tokens on every TP rank: about 10 of
        # the 34 bytes of Korthikanti et al.'s per-layer count stay unsplit
        per_block *= layout.tp * NO_SP_UNSPLIT + (1 - NO_SP_UNSPLIT)
    checkpointed = layout.checkpointed(spec.layers)
    kept = (layers - checkpointed) * per_block + checkpointed * checkpointed_block_bytes(spec, layout, tokens)
    # one checkpointed block's activations live again while it is recomputed
    peak = kept + (per_block if checkpointed else 0.0)
    in_flight = layout.n_micro if layout.pp_schedule == "gpipe" else min(layout.n_micro, layout.pp)
    if layout.pp == 1:
        in_flight = 1
    return overhead * (kept * in_flight + (peak - kept))


def checkpointed_block_bytes(spec: ModelSpec, layout: Layout, tokens: float) -> float:
    """What a checkpointed block keeps for ``tokens`` tokens per TP rank: its bf16 input under full
    checkpointing; under selective also its matmul and attention outputs (``selective_widths``; a
    row-parallel output is full width on every TP rank, so it counts tp times the split tokens)."""
    kept = CHECKPOINT_BYTES * spec.hidden * tokens
    if layout.tp > 1 and not layout.sp:
        kept *= layout.tp  # without SP every TP rank holds the block's whole input
    if layout.activation_checkpointing == "selective":
        split, whole = spec.selective_widths()
        kept += ACT_ELEMENT_BYTES * spec.hidden * tokens * (split + whole * layout.tp)
    return kept


def least_checkpointing(spec: ModelSpec, layout: Layout, usable: float, *, ema: bool = True,
                        activation_overhead: float = 1.0) -> Layout | None:
    """``layout`` (full checkpointing of every block) checkpointing only the first n blocks of each
    stage, n the fewest that fit in ``usable`` bytes; None where no checkpointing fits, or where
    every block must be checkpointed (those are candidates already). Memory falls with every block
    checkpointed, so n is a bisection over 1 .. L'-1."""
    stage = spec.layers // layout.pp
    if layout.activation_checkpointing != "full" or layout.checkpoint_blocks or stage < 2:
        return None

    def fits(n: int) -> bool:
        return memory(spec, replace(layout, activation_checkpointing="full" if n else False, checkpoint_blocks=n),
                      ema=ema, activation_overhead=activation_overhead).total <= usable

    if fits(0) or not fits(stage - 1):
        return None
    lo, hi = 0, stage - 1  # fits(hi) and not fits(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return replace(layout, checkpoint_blocks=hi)


def memory(spec: ModelSpec, layout: Layout, *, ema: bool = True, activation_overhead: float = 1.0) -> Memory:
    p = params_per_rank(spec, layout)
    shards = layout.fsdp_shards
    if layout.distopt:
        # Megatron's distributed optimizer: bf16 weights and fp32 gradients on every DP rank, the
        # fp32 main weights and Adam moments sharded over dp x cp
        per = {"weights": 2 * p, "grads": 4 * p, "optimizer": 12 * p / (layout.dp * layout.cp), "ema": 0.0}
    else:
        per = {k: p * v / shards for k, v in STATE_BYTES.items()}
    if not ema:
        per["ema"] = 0.0
    working = 0.0
    if shards > 1:
        # all-gathered fp32 parameters of the live blocks plus one block's unsharded gradients
        block = p / (spec.layers / layout.pp)
        working = (FSDP_LIVE_BLOCKS * 4 + 4) * block
    return Memory(per["weights"], per["grads"], per["optimizer"], per["ema"], working, activation_bytes(spec, layout, activation_overhead))
