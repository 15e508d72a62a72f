"""check_shared_run_folder's probe file (rank 0 writes it into train.out_dir, every rank looks for it)
leaves nothing behind in the run folder, also when a rank is lost during the check."""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
from pathlib import Path

from tests.gloo import free_port


def _rank(rank: int, port: int, folder: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=20))
    if rank == 1:
        dist.broadcast_object_list([None], src=0)  # learns the probe's name, as every rank does first,
        os._exit(0)  # and is lost before looking for it (a node that dies as the run starts)
    from vfm_parallel.trainer.run_folder import check_shared_run_folder

    try:
        check_shared_run_folder(folder)
        raised = None
    except Exception as exc:  # the collective that lost its peer
        raised = type(exc).__name__
    Path(folder, "..", "rank0.json").write_text(json.dumps({"raised": raised}))
    os._exit(0)  # no teardown of a group whose peer is gone


def test_the_probe_file_is_removed_when_a_rank_is_lost_during_the_check(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    ranks = [ctx.Process(target=_rank, args=(r, port, str(folder))) for r in range(2)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    assert json.loads((tmp_path / "rank0.json").read_text())["raised"] is not None, "the check passed without rank 1"
    assert not list(folder.glob(".vfm-shared-*")), "the probe file was left in the run folder"
