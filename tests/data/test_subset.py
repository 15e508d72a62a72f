import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.gloo import free_port
from vfm_data import make_loader

OPTIONS = dict(patch_size=2, max_seq_len=16, packing_buffer=8, streams=4, shuffle_buffer=None)
STEPS = 3


def _run(rank, world, port, path, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        loader = make_loader(path, batch_size=4, group=dist.group.WORLD, **OPTIONS)
        batches = [next(loader) for _ in range(STEPS)]
        out[rank] = {
            "keys": [b.keys for b in batches],
            "patches": [b.patches for b in batches],
            "cu_seqlens": [b.cu_seqlens for b in batches],
            "bytes_read": loader.bytes_read,
            "bytes_total": sum(b.nbytes for b in batches),
        }
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_subset_loading_gives_identical_batches_and_each_rank_reads_one_nth(small_dataset, world):
    out = mp.Manager().dict()
    # fork: the workers need no fresh interpreter, and spawning 4 of them costs ~10 s of imports each
    mp.start_processes(_run, args=(world, free_port(), str(small_dataset), out), nprocs=world, join=True,
                       start_method="fork")
    ranks = [out[r] for r in range(world)]
    for r in ranks[1:]:
        assert r["keys"] == ranks[0]["keys"]
        for a, b in zip(r["patches"], ranks[0]["patches"]):
            assert torch.equal(a, b)
        for a, b in zip(r["cu_seqlens"], ranks[0]["cu_seqlens"]):
            assert torch.equal(a, b)
    total = ranks[0]["bytes_total"]
    assert sum(r["bytes_read"] for r in ranks) == total  # every byte read once, by one rank
    for r in ranks:
        assert abs(r["bytes_read"] - total / world) < 0.5 * total / world  # each about 1/n
    # the gathered batch is what the same streams give read by one process, chunk after chunk
    single = make_loader(small_dataset, batch_size=4 // world, **OPTIONS)
    chunks = [next(single).keys for _ in range(STEPS * world)]
    expected = [sum(chunks[s * world : (s + 1) * world], []) for s in range(STEPS)]
    assert ranks[0]["keys"] == expected
