"""Model-parallel subset loading of a bucketed blend (batches of one resolution and duration each),
in 4 real gloo processes: 2 data-parallel ranks x a TP group of 2."""

import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.data.helpers import write_dataset
from tests.gloo import free_port
from vfm_data import make_loader, write_blend

TP = 2
BUCKETED = dict(patch_size=2, batch_size=2, blender="bucketed", shuffle_buffer=None,
                blender_options={"durations": [1, 2, 4], "batch_size": 2})
STEPS = 6


@pytest.fixture(scope="module")
def two_resolutions(tmp_path_factory):
    root = tmp_path_factory.mktemp("buckets")
    folders = [write_dataset(root / f"hw{hw}", 24, prefix=f"r{hw}_", seed=hw, hw=hw) for hw in (4, 6)]
    return write_blend(root / "blend.yaml", [(f, 1.0) for f in folders])


def _run(rank, world, port, blend, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        groups = [dist.new_group(list(range(g, g + TP))) for g in range(0, world, TP)]
        dp = dict(dp_rank=rank // TP, dp_world=world // TP)
        loader = make_loader(blend, group=groups[rank // TP], num_workers=1, **dp, **BUCKETED)
        batches = [next(loader) for _ in range(STEPS // 2)]
        state = json.loads(json.dumps(loader.state_dict()))
        loader.close()
        resumed = make_loader(blend, group=groups[rank // TP], **dp, **BUCKETED)
        resumed.load_state_dict(state)
        batches += [next(resumed) for _ in range(STEPS - STEPS // 2)]
        out[rank] = {"keys": [b.keys for b in batches], "latents": [b.latents for b in batches],
                     "bytes_read": loader.bytes_read + resumed.bytes_read, "bytes": sum(b.nbytes for b in batches)}
    finally:
        dist.destroy_process_group()


def test_bucketed_subset_loading_gives_each_tp_rank_the_batch_one_rank_read_and_resumes(two_resolutions):
    world = 2 * TP
    out = mp.Manager().dict()
    mp.start_processes(_run, args=(world, free_port(), str(two_resolutions), out), nprocs=world, join=True,
                       start_method="fork")
    ranks = [out[r] for r in range(world)]
    for dp in range(world // TP):
        first, second = ranks[dp * TP], ranks[dp * TP + 1]
        assert first["keys"] == second["keys"]  # the TP ranks of one DP rank: identical batches
        assert all(torch.equal(a, b) for a, b in zip(first["latents"], second["latents"]))
        # each step is one bucket of the blender's batch size (not TP of them concatenated)
        assert all(x.shape[0] == 2 for x in first["latents"])
        # each rank of the group read some steps, and together exactly what was used
        assert first["bytes_read"] > 0 and second["bytes_read"] > 0
        assert first["bytes_read"] + second["bytes_read"] == first["bytes"]
        # the sequence is the loader's without a group: subset loading changes who reads, not what
        single = make_loader(two_resolutions, dp_rank=dp, dp_world=world // TP, **BUCKETED)
        assert first["keys"] == [next(single).keys for _ in range(STEPS)]
    # the two DP ranks train on different samples
    assert not {k for b in ranks[0]["keys"] for k in b} & {k for b in ranks[TP]["keys"] for k in b}


def _three(rank, world, port, path, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        loader = make_loader(path, patch_size=2, batch_size=3, max_seq_len=16, packing_buffer=8, group=dist.group.WORLD)
        out[rank] = (loader.spec.streams, next(loader).keys)
    finally:
        dist.destroy_process_group()


def test_a_subset_group_of_three_ranks_loads_with_the_default_streams(small_dataset):
    out = mp.Manager().dict()
    mp.start_processes(_three, args=(3, free_port(), str(small_dataset), out), nprocs=3, join=True, start_method="fork")
    streams, keys = out[0]
    assert streams == 6  # the smallest multiple of 3 from the default 4
    assert out[1] == out[2] == (streams, keys) and len(keys) >= 3
