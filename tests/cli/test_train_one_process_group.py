"""A one-process ``vfm train`` whose strategy works over a device mesh (FSDP at size 1) starts a single-rank
process group (vfm_parallel.process_group.ensure_process_group); the command leaves it when it succeeds,
as a torchrun rank leaves its group, instead of leaving it to the interpreter's exit (on CUDA, torch warns
there that the NCCL group was never destroyed) or to the next command run in the same process."""

from __future__ import annotations

import torch.distributed as dist

from tests.cli.test_export_checkpoint import _cli_train


def test_a_one_process_train_over_a_mesh_leaves_no_process_group_behind(tmp_path):
    _cli_train(tmp_path / "run", parallel={"strategies": ["fsdp"]})
    assert not dist.is_initialized()
