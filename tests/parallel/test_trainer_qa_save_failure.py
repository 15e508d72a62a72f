"""A checkpoint save that the file system refuses on one rank (a full disk) fails on every rank alike
with one ``CheckpointSaveError`` naming the step, the rank and the OS error, instead of a DCP
traceback (or a hang when the failing rank is alone); no partial folder stays and the checkpoint
before it stays whole and resumable."""

from __future__ import annotations

import os
import resource

from tests.gloo import spawn
from tests.parallel.trainer_helpers import EachBatch, build_parts, tiny_config
from vfm_parallel import checkpoint as ckpt
from vfm_parallel.trainer import from_dict, train


def _full_disk_on_rank_1_after_step_2(rank: int, world: int, root: str) -> dict:
    from pathlib import Path

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def build(ctx):
        parts = build_parts(ctx)
        if ctx.coords.rank == 1:
            def full_disk_from_third(n, batch):  # from its 3rd batch on (after step 2's checkpoint) no file may grow past 1 KiB
                if n == 3:
                    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
                return batch

            parts.loader = EachBatch(parts.loader, full_disk_from_third)
        return parts

    cfg = from_dict(tiny_config(Path(root), train={"steps": 4}, checkpoint={"interval": 2, "keep": 1}), world)
    try:
        train(cfg, build)
        error = None
    except ckpt.CheckpointSaveError as exc:
        error = str(exc)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    left = sorted(p.name for p in (Path(root) / "checkpoints").iterdir())
    ckpt.verify(Path(root) / "checkpoints" / "step_00000002")  # whole (collective)
    resumed = train(cfg, build_parts)
    return {"error": error, "left": left, "resumed_from": resumed.start_step}


def test_a_save_refused_on_one_rank_fails_on_both_and_keeps_the_previous_checkpoint(tmp_path):
    for seen in spawn(_full_disk_on_rank_1_after_step_2, 2, str(tmp_path)):
        error = seen["error"]
        assert error is not None and error.startswith(f"saving checkpoint {tmp_path / 'checkpoints' / 'step_00000004'} "
                                                      f"failed on rank 1 (OSError: [Errno 27] File too large")
        assert f"the newest committed checkpoint, {tmp_path / 'checkpoints' / 'step_00000002'}, is untouched" in error
        assert seen["left"] == ["step_00000002"]  # no .tmp-step_00000004, and keep = 1 pruned nothing
        assert seen["resumed_from"] == 2
