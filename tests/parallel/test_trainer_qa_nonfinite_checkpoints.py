"""A run going non-finite keeps its last good checkpoints: the steps it skips as non-finite are not
saved, so ``checkpoint.keep`` does not prune the checkpoints before the divergence in favour of
copies of the state that diverged, and ``resume = "auto"`` finds the last finite step."""

from __future__ import annotations

import pytest
import torch

from tests.parallel.trainer_helpers import build_parts, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.checkpoint import list_checkpoints
from vfm_parallel.trainer import NonFiniteTrainingError, from_dict, train


class _NanFrom:
    """The loader with every batch from the ``first``-th on (1-based) made NaN."""

    def __init__(self, loader, first: int) -> None:
        self.loader, self.first = loader, first

    def __iter__(self):
        for n, batch in enumerate(self.loader, start=1):
            yield {**batch, "x0": torch.full_like(batch["x0"], float("nan"))} if n >= self.first else batch

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)


def _nan_from(first: int):
    def build(ctx):
        parts = build_parts(ctx)
        parts.loader = _NanFrom(parts.loader, first)
        return parts

    return build


@pytest.mark.parametrize("optim, logging", [({"fused": "off"}, {}), ({"fused": "on"}, {"interval": 2})])
def test_skipped_steps_are_not_saved_and_the_good_checkpoints_are_kept(tmp_path, optim, logging):
    cfg = tiny_config(tmp_path, train={"steps": 10, "max_nonfinite_steps": 3}, checkpoint={"interval": 1, "keep": 2},
                      optim=optim, logging=logging)
    with pytest.warns(RuntimeWarning, match=r"checkpoint of step 4 not saved: step 4 was not finite"):
        with pytest.raises(NonFiniteTrainingError, match=r"steps 4, 5, 6 .* The newest checkpoint, of the last finite step saved: .*step_00000003"):
            train(from_dict(cfg), _nan_from(4))
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["step_00000002", "step_00000003"]
