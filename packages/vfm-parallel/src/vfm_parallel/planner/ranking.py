"""The plan: predict every candidate layout, drop the ones vfm refuses or that run out of memory
(saying so), rank the rest by tokens/s/GPU, and say why each loses to the winner."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from vfm_parallel.dims import divisors
from vfm_parallel.planner.hardware import HardwareProfile
from vfm_parallel.planner.layouts import Layout, enumerate_layouts, vfm_rejects
from vfm_parallel.planner.memory import Memory, least_checkpointing, memory
from vfm_parallel.planner.memory import significant as _sig
from vfm_parallel.planner.model_spec import ModelSpec
from vfm_parallel.planner.timing import StepTime, step_time

GIB = 2**30
#: Step-time components, as the reasons name them.
_COMPONENT_NAMES = {
    "compute": "slower compute per token",
    "kernels": "more, smaller kernels (fixed cost per kernel)",
    "tp_comm": "exposed TP communication",
    "cp_comm": "exposed CP communication",
    "dp_comm": "exposed FSDP/DDP communication",
    "pp_bubble": "pipeline bubble",
    "pp_comm": "pipeline sends",
    "optimizer": "optimizer step",
}


#: The same components as a gain ("less ...").
_SAVING_NAMES = {
    "compute": "compute", "kernels": "kernel overhead", "tp_comm": "TP communication", "cp_comm": "CP communication",
    "dp_comm": "FSDP/DDP communication", "pp_bubble": "pipeline bubble", "pp_comm": "pipeline sends", "optimizer": "optimizer time",
}


class PlanError(ValueError):
    """No layout fits, or the request itself is wrong (GPU count, batch)."""


@dataclass
class Prediction:
    layout: Layout
    memory: Memory
    time: StepTime | None
    rejected: str = ""  # why vfm refuses it ('' = accepted)
    oom: bool = False
    reason: str = ""  # why it loses to the winner

    @property
    def feasible(self) -> bool:
        return not self.rejected and not self.oom

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.time.tokens_per_s_per_gpu if self.time else 0.0

    @property
    def tflops_per_gpu(self) -> float:
        return self.time.tflops_per_gpu if self.time else 0.0

    def to_dict(self) -> dict:
        out = {"layout": self.layout.short(), "parallel": self.layout.parallel_table(), "micro_batch": self.layout.micro_batch,
               "grad_accum": self.layout.grad_accum, "memory_gib": self.memory.as_gib(), "rejected": self.rejected,
               "oom": self.oom, "reason": self.reason}
        if self.time:
            out.update(tokens_per_s_per_gpu=_sig(self.tokens_per_s_per_gpu), tflops_per_gpu=_sig(self.tflops_per_gpu),
                       step_s=_sig(self.time.total), breakdown_s={k: _sig(v) for k, v in self.time.breakdown().items()},
                       crosses_nodes=self.time.crosses_nodes)
        return out


@dataclass
class Plan:
    spec: ModelSpec
    hardware: HardwareProfile
    world: int
    global_batch: int
    ranked: list[Prediction] = field(default_factory=list)  # feasible, best first
    others: list[Prediction] = field(default_factory=list)  # refused by vfm or out of memory
    #: Data-parallel degrees no layout has because the global batch is not a multiple of them.
    batch_excludes: list[int] = field(default_factory=list)

    def batch_note(self) -> str:
        """'' or a line saying which data-parallel degrees the global batch rules out (and what would not)."""
        if not self.batch_excludes:
            return ""
        allowed = -(-self.global_batch // self.world) * self.world  # every degree divides the world
        return (f"note: data parallelism over {', '.join(map(str, self.batch_excludes))} ranks is left out: the global "
                f"batch of {self.global_batch} samples is not a multiple of {'it' if len(self.batch_excludes) == 1 else 'them'} (a multiple of {self.world}, e.g. "
                f"--global-batch {allowed}, allows every degree)")

    @property
    def best(self) -> Prediction:
        return self.ranked[0]

    def distinct(self, key=lambda p: p.layout.model_parallel()) -> list[Prediction]:
        """The best prediction per ``key`` (default: per (tp, cp, pp), what the published tables name)."""
        seen, out = set(), []
        for p in self.ranked:
            k = key(p)
            if k not in seen:
                seen.add(k)
                out.append(p)
        return out

    def rank_of(self, match) -> int | None:
        """1-based rank among :meth:`distinct` of the first prediction ``match`` accepts (None if none)."""
        for i, p in enumerate(self.distinct(), 1):
            if match(p.layout):
                return i
        return None

    def find(self, match, include_infeasible: bool = True) -> list[Prediction]:
        pool = self.ranked + (self.others if include_infeasible else [])
        return [p for p in pool if match(p.layout)]


def predict(spec: ModelSpec, layout: Layout, hw: HardwareProfile, *, ema: bool = True, framework: str = "vfm") -> Prediction:
    """Memory and step time of one layout. ``framework="megatron"`` predicts what NeMo/Megatron-Core
    would do with it (no vfm rules, no EMA copy), for checking against published figures."""
    rejected = vfm_rejects(layout, spec) if framework == "vfm" else ""
    ema = ema and framework == "vfm"
    mem = memory(spec, layout, ema=ema, activation_overhead=hw.calibration.activation_overhead)
    oom = mem.total > hw.usable_bytes
    pred = Prediction(layout, mem, step_time(spec, layout, hw, ema=ema, framework=framework), rejected=rejected, oom=oom)
    if rejected:
        pred.reason = f"vfm refuses it: {rejected}"
    elif oom:
        pred.reason = f"OOM at {mem.total / GIB:.1f} GiB (usable {hw.usable_bytes / GIB:.1f} GiB)"
    return pred


def plan(spec: ModelSpec, world: int, hw: HardwareProfile, *, global_batch: int, ema: bool = True,
         framework: str = "vfm", **enumerate_options) -> Plan:
    """Enumerate, predict and rank every layout of ``world`` GPUs for ``spec``."""
    if world < 1:
        raise PlanError(f"--gpus must be >= 1, got {world}")
    if global_batch < 1:
        raise PlanError(f"the global batch must be >= 1 sample, got {global_batch}")
    per_node = enumerate_options.pop("gpus_per_node", None) or hw.gpus_per_node
    if per_node != hw.gpus_per_node:  # the placement model (timing.group_bandwidth) reads the profile's
        hw = replace(hw, gpus_per_node=per_node)
    if world > per_node and world % per_node:
        fits = [d for d in divisors(world) if 1 < d < world and d <= max(8, 2 * per_node)]
        raise PlanError(f"{world} GPUs are not whole nodes of {per_node} GPUs; accepted: at most {per_node} GPUs "
                        f"(one node) or a multiple of {per_node}, or give the GPUs per node (--nodes-of"
                        f"{', a divisor of ' + str(world) + ' such as ' + ', '.join(map(str, fits[-3:])) if fits else ''})")
    enumerate_options["gpus_per_node"] = per_node
    result = Plan(spec, hw, world, global_batch)
    result.batch_excludes = [d for d in divisors(world) if global_batch % d]
    for layout in enumerate_layouts(world, spec, global_batch, framework=framework, **enumerate_options):
        pred = predict(spec, layout, hw, ema=ema, framework=framework)
        (result.ranked if pred.feasible else result.others).append(pred)
        # where no checkpointing runs out of memory and full checkpointing fits: also the fewest
        # checkpointed blocks per stage that fit (the least recompute), not every count in between
        partial = least_checkpointing(spec, layout, hw.usable_bytes, ema=ema and framework == "vfm",
                                      activation_overhead=hw.calibration.activation_overhead) if pred.feasible else None
        if partial is not None:
            pred = predict(spec, partial, hw, ema=ema, framework=framework)
            (result.ranked if pred.feasible else result.others).append(pred)
    if not result.ranked and not result.others:
        raise PlanError(f"no layout of {world} GPUs splits a global batch of {global_batch} samples: "
                        "the data-parallel degree must divide it (use --global-batch)")
    result.ranked.sort(key=lambda p: -p.tokens_per_s_per_gpu)
    result.others.sort(key=lambda p: (bool(p.rejected), p.memory.total))
    if result.ranked:
        for p in result.ranked[1:]:
            p.reason = why_slower(p, result.best)
    return result


def why_slower(pred: Prediction, best: Prediction) -> str:
    """The step-time component (per token) that most exceeds the winner's, named; plus TP across nodes."""
    if pred.tokens_per_s_per_gpu >= best.tokens_per_s_per_gpu * (1 - 1e-3):
        # "+0.0% of the winner's step" named a cause for a difference there is not
        text = "ties with the winner (within 0.1%; the order between them is arbitrary)"
        saved = best.memory.total - pred.memory.total
        if saved >= 0.05 * best.memory.total:
            text = f"ties with the winner (within 0.1%) in {saved / GIB:.1f} GiB less memory: the safer choice"
        return f"TP across nodes; {text}" if pred.time.crosses_nodes.get("tp") else text
    mine = {k: v / pred.time.tokens_per_step for k, v in pred.time.breakdown().items()}
    theirs = {k: v / best.time.tokens_per_step for k, v in best.time.breakdown().items()}
    worst = max(mine, key=lambda k: mine[k] - theirs[k])
    excess = (mine[worst] - theirs[worst]) / sum(theirs.values())
    name = _COMPONENT_NAMES[worst]
    if worst == "compute":
        # recompute only where the loser runs more of it again than the winner: two layouts that both
        # checkpoint every block differ in their matrices' shapes, not in recompute
        more_recompute = (pred.time.recompute / pred.time.tokens_per_step - best.time.recompute / best.time.tokens_per_step)
        name += (" (activation recompute)" if more_recompute > (mine[worst] - theirs[worst]) / 2
                 else " (thinner per-rank matrices)")
    text = f"{name}: +{excess:.1%} of the winner's step"
    net = sum(mine.values()) / sum(theirs.values()) - 1
    if net < excess / 2:
        # the named excess is mostly paid back elsewhere: say where, and the net loss, or a reader
        # sees "+14%" on a layout 0.5% behind
        gain = min(mine, key=lambda k: mine[k] - theirs[k])
        saved = (theirs[gain] - mine[gain]) / sum(theirs.values())
        what = f"less {_SAVING_NAMES[gain]}"
        if gain == "compute" and best.layout.activation_checkpointing and not pred.layout.activation_checkpointing:
            what = "no activation recompute"
        text += f", {what} -{saved:.1%} (net +{net:.1%})"
    if pred.time.crosses_nodes.get("tp"):
        text = f"TP across nodes; {text}"
    return text
