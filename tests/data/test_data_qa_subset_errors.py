"""A shard error on one rank of a subset-loading group stops every rank of the group with it, in 2
real gloo processes (the others waited in the step's collective: "Connection closed by peer" once the
failing process exited, a hang until the collective's timeout while it lived)."""

import datetime
import os

import pytest
import torch
import torch.distributed as dist

from tests.data.helpers import in_forked_group, meta, quiet
from vfm_data import ShardWriter, make_loader, prepare_dataset


def _run(rank, world, path, whole):
    options = (dict(blender="bucketed", blender_options={"durations": [1], "batch_size": 2}) if whole
               else dict(max_seq_len=16, packing_buffer=4))
    try:
        loader = make_loader(path, patch_size=2, batch_size=2, streams=2, shuffle_buffer=None, group=dist.group.WORLD,
                             **options)
        for _ in range(4):
            next(loader)
        return "no error"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("whole", [False, True], ids=["packed", "bucketed"])
def test_a_shard_error_on_one_rank_stops_every_rank_of_the_group_with_it(tmp_path, whole):
    with ShardWriter(tmp_path, max_shard_bytes=16_000) as w:  # 4 samples a shard: stream 1 reads shard 1 only
        for i in range(8):
            w.write(f"k{i}", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    assert len(w.shards) == 2
    quiet(prepare_dataset, tmp_path)
    w.shards[1].write_bytes(os.urandom(w.shards[1].stat().st_size))  # garbage, after energon indexed it
    out = in_forked_group(_run, 2, str(tmp_path), whole, timeout=datetime.timedelta(seconds=20))
    for rank in range(2):
        assert out[rank].startswith("ShardError: vfm_data: shard ") and "shard-000001.tar does not start with a tar header" in out[rank], out[rank]
