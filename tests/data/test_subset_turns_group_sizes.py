"""Steps shared in turns by a subset group whose size does not divide the streams (3 real gloo
processes, 4 streams): the loader's default streams are one process's, so a state continues under
any group size (``vfm train``: pp x cp x tp changed at a resume), and the batches are that process's."""

import json
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.gloo import free_port
from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, shuffle_buffer=None, max_seq_len=16, packing_buffer=8, share="turns")


def _run(rank, world, port, path, state, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        loader = make_loader(path, group=dist.group.WORLD, num_workers=rank % 2, **OPTIONS)  # in and out of process
        loader.load_state_dict(state)
        keys = [next(loader).keys for _ in range(5)]
        saved = json.loads(json.dumps(loader.state_dict()))
        loader.close()
        out[rank] = (loader.spec.streams, keys, loader.bytes_read, saved)
    finally:
        dist.destroy_process_group()


def test_a_one_process_state_continues_in_a_group_of_three_and_back(small_dataset):
    straight = make_loader(small_dataset, **OPTIONS)
    keys = [next(straight).keys for _ in range(10)]
    straight.close()
    one = make_loader(small_dataset, **OPTIONS)
    next(one), next(one)
    state = json.loads(json.dumps(one.state_dict()))
    one.close()
    out = mp.Manager().dict()
    mp.start_processes(_run, args=(3, free_port(), str(small_dataset), state, out), nprocs=3, join=True,
                       start_method="fork")
    ranks = [out[r] for r in range(3)]
    assert {r[0] for r in ranks} == {one.spec.streams} == {4}  # one process's streams, not a multiple of 3
    assert all(r[1] == keys[2:7] for r in ranks)  # the straight run's steps 2..6 on every rank
    assert all(r[2] > 0 for r in ranks)  # each rank read some of them: its streams' turns
    back = make_loader(small_dataset, **OPTIONS)
    back.load_state_dict(ranks[0][3])  # and the group's state continues in one process
    assert [next(back).keys for _ in range(3)] == keys[7:]
    back.close()
