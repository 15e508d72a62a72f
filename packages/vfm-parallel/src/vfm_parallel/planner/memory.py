"""Per-rank memory of a layout: parameter states under FSDP sharding, the FSDP working set,
activations with and without checkpointing, and the pipeline's in-flight microbatches.

All figures are bytes on the busiest rank (the first pipeline stage holds the most microbatches).
"""

from __future__ import annotations

from dataclasses import dataclass

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
        return {k: round(getattr(self, k) / 2**30, 2) for k in keys}


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
    if layout.activation_checkpointing:
        kept = layers * CHECKPOINT_BYTES * spec.hidden * tokens
        peak = kept + per_block  # one block's activations live again while it is recomputed
    else:
        kept = layers * per_block
        peak = kept
    in_flight = layout.n_micro if layout.pp_schedule == "gpipe" else min(layout.n_micro, layout.pp)
    if layout.pp == 1:
        in_flight = 1
    return overhead * (kept * in_flight + (peak - kept))


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
