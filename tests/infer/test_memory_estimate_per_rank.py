"""The memory check counts what one rank holds: a forward is a batch of 2 only where both guidance
branches run on that rank, not under CFG-parallel (one branch per rank) nor at guidance 0 or 1 (one
branch). Counting 2 refused requests that CFG-parallel exists to fit."""

from __future__ import annotations

import re

import pytest

from tests.infer.tiny import tiny_dit, tiny_meta
from vfm_infer.pipeline import GenerationSpec, VideoPipeline

#: far beyond any host: the check refuses it and says what it estimated
HUGE = dict(steps=2, frames=256, size=(1024, 1024))


def _estimate(guidance: float, cfg_parallel: bool = False) -> str:
    pipe = VideoPipeline(tiny_dit(), tiny_meta())
    with pytest.raises(ValueError, match="need about") as info:
        pipe.prepare(GenerationSpec(guidance=guidance, **HUGE), ["1"], cfg_parallel=cfg_parallel)
    return re.search(r"need (about [^)]*\))", str(info.value)).group(1)


def test_cfg_parallel_and_a_single_branch_guidance_are_estimated_as_one_branch_per_rank():
    both = _estimate(4.0)
    per_rank = _estimate(4.0, cfg_parallel=True)
    assert per_rank == _estimate(1.0) == _estimate(0.0)
    activations = lambda text: float(re.search(r"transformer activations ([\d,.]+) GiB", text).group(1).replace(",", ""))  # noqa: E731
    assert activations(both) == pytest.approx(2 * activations(per_rank), rel=0.01)
