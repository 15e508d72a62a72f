"""Candidate layouts: every combination of mesh sizes, CP strategy, pipeline schedule, data-parallel
kind, activation checkpointing (none, full, selective) and micro-batch for a world size, and the
check that vfm accepts each one (``ParallelDims.validate`` plus the trainer config's own rules,
called, not copied)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from vfm_parallel.dims import LayoutError, ParallelDims, divisors
from vfm_parallel.planner.model_spec import ModelSpec
from vfm_parallel.strategy import get_strategy

CP_STRATEGIES = ("cp-ring", "cp-ulysses")
PP_SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True)
class Layout:
    """One way to run the model: the ``[parallel]`` block plus the batch split it assumes."""

    tp: int = 1
    cp: int = 1
    pp: int = 1
    dp_shard: int = 1
    dp_replicate: int = 1
    cp_strategy: str = ""  # cp-ring | cp-ulysses when cp > 1
    pp_schedule: str = "1f1b"
    pp_microbatches: int = 0  # 0 = pp
    #: False | "full" | "selective" (True reads as "full"): ``parallel.activation_checkpointing``.
    activation_checkpointing: bool | str = False
    #: Blocks of each pipeline stage checkpointed, the first ones; 0 = all (``parallel.checkpoint_blocks``).
    checkpoint_blocks: int = 0
    micro_batch: int = 1  # samples per rank per micro-step (data.micro_batch)
    grad_accum: int = 1  # micro-steps per optimizer step (optim.grad_accum)
    #: Sequence parallelism with TP (``sp``); vfm runs CP with plain ``tp`` (sp + cp is not supported), and so a
    #: sequence tp does not divide (sp keeps S/tp tokens per rank).
    sp: bool = True
    #: Megatron's distributed optimizer instead of FSDP (framework="megatron" only: not a vfm strategy).
    distopt: bool = False

    def __post_init__(self) -> None:
        if self.activation_checkpointing is True:
            object.__setattr__(self, "activation_checkpointing", "full")
        if self.activation_checkpointing not in (False, "full", "selective"):
            raise ValueError(f"activation_checkpointing must be False, True, 'full' or 'selective', got {self.activation_checkpointing!r}")

    def checkpointed(self, layers: int) -> int:
        """Blocks of a pipeline stage (of ``layers`` blocks in the model) that are checkpointed."""
        if not self.activation_checkpointing:
            return 0
        stage = layers // self.pp
        return min(self.checkpoint_blocks, stage) if self.checkpoint_blocks else stage

    @property
    def dims(self) -> ParallelDims:
        return ParallelDims(pp=self.pp, dp_replicate=self.dp_replicate, dp_shard=self.dp_shard, cp=self.cp, tp=self.tp)

    @property
    def world_size(self) -> int:
        return self.dims.world_size

    @property
    def dp(self) -> int:
        return self.dp_shard * self.dp_replicate

    @property
    def n_micro(self) -> int:
        """Pipeline microbatches per micro-step."""
        return self.pp_microbatches or self.pp

    @property
    def dp_kind(self) -> str:
        """The data-parallel strategy vfm's trainer picks for these sizes (trainer.distributed)."""
        if self.distopt:
            return "distopt"
        return self.dims.data_parallel_strategy

    @property
    def fsdp_shards(self) -> int:
        """Ranks one parameter is sharded over (FSDP/HSDP shard over dp_shard x cp; DDP keeps it whole)."""
        return self.dp_shard * self.cp if self.dp_kind in ("fsdp", "hsdp") else 1

    def strategies(self) -> list[str]:
        names = []
        if self.pp > 1:
            names.append("pp")
        if self.tp > 1:
            names.append("sp" if self.sp else "tp")
        if self.cp > 1:
            names.append(self.cp_strategy or "cp-ring")
        if self.activation_checkpointing:
            names.append("ac")
        if self.dp_kind:
            names.append(self.dp_kind)
        return names

    def model_parallel(self) -> tuple[int, int, int]:
        """(tp, cp, pp): what the published tables name; the rest is how the batch is split."""
        return self.tp, self.cp, self.pp

    def short(self) -> str:
        parts = [f"tp{self.tp}" if self.tp > 1 else "", f"cp{self.cp}" + (":ulysses" if self.cp_strategy == "cp-ulysses" else "") if self.cp > 1 else "",
                 f"pp{self.pp}:{self.pp_schedule}/{self.n_micro}" if self.pp > 1 else ""]
        if self.dp_kind == "hsdp":
            parts.append(f"hsdp{self.dp_replicate}x{self.dp_shard}")
        elif self.dp_kind:
            parts.append(f"{self.dp_kind}{self.dp if self.dp > 1 else ''}")
        if self.activation_checkpointing:
            parts.append("ac" + ("-selective" if self.activation_checkpointing == "selective" else "")
                         + (f"-first{self.checkpoint_blocks}" if self.checkpoint_blocks else ""))
        parts.append(f"mb{self.micro_batch}")
        return " ".join(p for p in parts if p)

    def parallel_table(self) -> dict:
        """The ``[parallel]`` section of a vfm train config."""
        table = {"pp": self.pp, "dp_replicate": self.dp_replicate, "dp_shard": self.dp_shard, "cp": self.cp, "tp": self.tp,
                 "strategies": self.strategies(), "activation_checkpointing": self.activation_checkpointing}
        # always written: a config's own checkpoint_blocks would otherwise outlive a layout without
        # checkpointing, which vfm refuses (blocks to checkpoint with activation_checkpointing false)
        table["checkpoint_blocks"] = self.checkpoint_blocks
        if self.pp > 1:
            table["pp_schedule"] = self.pp_schedule
            table["pp_microbatches"] = self.n_micro
        return table


def vfm_rejects(layout: Layout, spec: ModelSpec) -> str:
    """Why vfm would refuse this layout ('' if it accepts it): the mesh against the world and the
    model (``ParallelDims.validate``), then the training config's rules (``trainer.config.validate``)."""
    try:
        layout.dims.validate(layout.world_size, spec, spec.seq_len)
    except LayoutError as exc:
        return str(exc).split(": ", 1)[-1]
    if layout.sp and layout.tp > 1 and layout.cp > 1:
        return "sp does not combine with context parallelism (use tp with cp)"
    if layout.sp:  # what vfm train refuses before any rank starts: S/tp tokens per rank
        try:
            get_strategy("sp").check_tokens(layout.dims, spec.seq_len)
        except LayoutError as exc:
            return str(exc)
    if layout.cp_strategy == "cp-ulysses" and (spec.heads // layout.tp) % layout.cp:
        return f"cp-ulysses needs heads per TP rank ({spec.heads // layout.tp}) divisible by cp {layout.cp}"
    parallel = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in layout.parallel_table().items()))
    return _config_rejects(parallel, layout.micro_batch, layout.grad_accum, layout.world_size)


@lru_cache(maxsize=None)
def _config_rejects(parallel: tuple, micro_batch: int, grad_accum: int, world: int) -> str:
    from vfm_parallel.trainer.config import ConfigError, from_dict

    table = {k: list(v) if isinstance(v, tuple) else v for k, v in parallel}
    data = {"parallel": table, "data": {"source": "synthetic", "micro_batch": micro_batch}, "optim": {"grad_accum": grad_accum}}
    try:
        from_dict(data, world)
    except ConfigError as exc:
        return str(exc)
    return ""


def _pow2_upto(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


FRAMEWORKS = ("vfm", "megatron")
#: Checkpointing enumerated per framework; the partial ones (the first n blocks of each stage, the
#: fewest that fit) are derived from "full" once memory is known (``ranking.plan``). Megatron's
#: selective recompute (core attention) keeps nearly as much as none under flash attention: left out.
CHECKPOINTING = {"vfm": (False, "full", "selective"), "megatron": (False, "full")}


def enumerate_layouts(world: int, spec: ModelSpec, global_batch: int, *, gpus_per_node: int = 8,
                      max_tp: int | None = None, max_cp: int = 32, max_pp: int = 16,
                      max_micro_batch: int = 8, framework: str = "vfm") -> Iterator[Layout]:
    """Every layout of ``world`` ranks for ``global_batch`` samples per optimizer step (before vfm's
    checks: the caller sorts out the ones vfm refuses, with the reason). TP up to two nodes' worth of
    GPUs, so that "TP across nodes" shows up as a reason rather than silently missing.

    ``framework="megatron"`` enumerates what NeMo/Megatron-Core runs instead (for comparing with
    published figures): data parallelism by the distributed optimizer or FSDP over all DP ranks."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    max_tp = max_tp or 2 * gpus_per_node
    for tp in (d for d in divisors(world) if d <= max_tp):
        for cp in (d for d in divisors(world // tp) if d <= max_cp):
            # vfm runs TP with SP where it can: not with cp, nor over a tp that does not divide the sequence
            sp_fits = cp == 1 and spec.seq_len % tp == 0
            # pp above the layers leaves stages without a block: no layout at all (not a refused one)
            for pp in (d for d in divisors(world // (tp * cp)) if d <= max_pp and d <= spec.layers):
                dp = world // (tp * cp * pp)
                if global_batch % dp:
                    continue
                per_rank = global_batch // dp
                if framework == "vfm":
                    splits = _dp_splits(dp, tp * cp, gpus_per_node)
                    mbs = [m for m in _pow2_upto(min(per_rank, max_micro_batch * pp)) if per_rank % m == 0]
                else:
                    # the seeds' list of what NeMo supports (seeds/004, "Features Status"): FSDP, and
                    # CP+TP+SP with FSDP or the distributed optimizer; PP only with the distributed optimizer
                    splits = [(1, dp, True)] + ([(1, dp, False)] if pp == 1 else [])
                    # Megatron runs a rank's whole share of the global batch as one pipeline
                    # (num_microbatches = global / (dp x micro-batch)): no flush between micro-steps
                    mbs = [per_rank] if pp > 1 else [m for m in _pow2_upto(min(per_rank, max_micro_batch)) if per_rank % m == 0]
                for dp_replicate, dp_shard, *distopt in splits:
                    cp_choices = (CP_STRATEGIES if framework == "vfm" else ("cp-ring",)) if cp > 1 else ("",)
                    for cp_strategy in cp_choices:
                        for ac in CHECKPOINTING[framework]:
                            for mb in mbs:
                                for schedule, n_micro in _pipeline_choices(pp, mb):
                                    if framework == "megatron" and schedule != "1f1b":
                                        continue
                                    yield Layout(tp=tp, cp=cp, pp=pp, dp_shard=dp_shard, dp_replicate=dp_replicate,
                                                 cp_strategy=cp_strategy, pp_schedule=schedule, pp_microbatches=n_micro,
                                                 activation_checkpointing=ac, micro_batch=mb, grad_accum=per_rank // mb,
                                                 distopt=bool(distopt and distopt[0]), sp=framework == "megatron" or sp_fits)


def _dp_splits(dp: int, inner: int, gpus_per_node: int) -> list[tuple[int, int]]:
    """(dp_replicate, dp_shard): FSDP over all, DDP, and HSDP sharding inside one node."""
    splits = [(1, dp)]
    if dp > 1:
        splits.append((dp, 1))
        node_shard = gpus_per_node // inner if gpus_per_node % inner == 0 else 0
        if 1 < node_shard < dp and dp % node_shard == 0:
            splits.append((dp // node_shard, node_shard))
    return splits


def _pipeline_choices(pp: int, micro_batch: int) -> list[tuple[str, int]]:
    if pp == 1:
        return [("1f1b", 0)]
    out = []
    for n in _pow2_upto(micro_batch):
        if n >= pp and micro_batch % n == 0:
            out.extend((schedule, n) for schedule in PP_SCHEDULES)
    return out
