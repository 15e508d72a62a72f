"""Stage fusion: adjacent stages that need the same device run one after another inside one worker
call, so a video makes one Ray call per group instead of one per stage (no fill and drain between
cheap stages, no object-store round trip per stage).

Rule (:func:`fuse`): adjacent stages join while they ask for the same GPUs per worker (all CPU-only
stages form one group; a GPU stage never holds its GPU through a CPU stage's work, nor a CPU stage
through a GPU stage's), unless ``run.workers`` pins a stage's worker count: a pinned stage runs alone,
as asked. The auto-balancer then sizes workers per group.
"""

from __future__ import annotations

from dataclasses import dataclass

from vfm_curator.execution.spec import StageSpec
from vfm_curator.stages.base import Resources


@dataclass(frozen=True)
class StageGroup:
    """Stages run back to back in one worker call (a group of one is a plain stage call)."""

    specs: tuple[StageSpec, ...]

    @property
    def name(self) -> str:
        return "+".join(self.stages)

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    @property
    def batch_size(self) -> int:
        # items enter a call together and go through every stage of it: the smallest batch any
        # member accepts (a bigger batch would only leave workers idle at the end of the stream).
        # A batching stage that should keep its batch (shard_text's 16 captions per forward) is
        # pinned with run.workers and runs alone. Fusing equal batches only was measured: the
        # clipping stages on CPU then make three calls per video, 10-25 % slower warm, 20-30 % cold.
        return min(s.batch_size for s in self.specs)

    def declared(self) -> Resources:
        """One worker of the group: the members run one at a time in it, so it needs the most any of
        them asks for (not the sum), and the same GPUs as each of them. (What each member's setup
        loads stays loaded: two model-loading CPU stages in one group hold both models in every
        worker; pinning one with ``run.workers`` runs it alone.)"""
        asks = [s.declared() for s in self.specs]
        return Resources(cpus=max(r.cpus for r in asks), gpus=max(r.gpus for r in asks),
                         memory_mb=max(r.memory_mb for r in asks))


def fuse(specs: list[StageSpec], *, pinned: set[str] | frozenset[str] = frozenset(), enabled: bool = True) -> list[StageGroup]:
    """Groups of adjacent stages with the same GPU need, in pipeline order; ``pinned`` stages (a
    fixed worker count) and, with ``enabled=False``, every stage run alone."""
    groups: list[list[StageSpec]] = []
    for spec in specs:
        last = groups[-1] if groups else None
        if (enabled and last is not None and spec.name not in pinned and last[-1].name not in pinned
                and spec.declared().gpus == last[-1].declared().gpus):
            last.append(spec)
        else:
            groups.append([spec])
    return [StageGroup(tuple(g)) for g in groups]
