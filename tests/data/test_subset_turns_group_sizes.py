"""Steps shared in turns by a subset group whose size does not divide the streams (3 real gloo
processes, 4 streams): the loader's default streams are one process's, so a state continues under
any group size (``vfm train``: pp x cp x tp changed at a resume), and the batches are that process's."""

import json

import torch.distributed as dist

from tests.data.helpers import in_forked_group
from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, shuffle_buffer=None, max_seq_len=16, packing_buffer=8, share="turns")


def _run(rank, world, path, state):
    loader = make_loader(path, group=dist.group.WORLD, num_workers=rank % 2, **OPTIONS)  # in and out of process
    loader.load_state_dict(state)
    keys = [next(loader).keys for _ in range(5)]
    saved = json.loads(json.dumps(loader.state_dict()))
    loader.close()
    return (loader.spec.streams, keys, loader.bytes_read, saved)


def test_a_one_process_state_continues_in_a_group_of_three_and_back(small_dataset):
    straight = make_loader(small_dataset, **OPTIONS)
    keys = [next(straight).keys for _ in range(10)]
    straight.close()
    one = make_loader(small_dataset, **OPTIONS)
    next(one), next(one)
    state = json.loads(json.dumps(one.state_dict()))
    one.close()
    ranks = in_forked_group(_run, 3, str(small_dataset), state)
    assert {r[0] for r in ranks} == {one.spec.streams} == {4}  # one process's streams, not a multiple of 3
    assert all(r[1] == keys[2:7] for r in ranks)  # the straight run's steps 2..6 on every rank
    assert all(r[2] > 0 for r in ranks)  # each rank read some of them: its streams' turns
    back = make_loader(small_dataset, **OPTIONS)
    back.load_state_dict(ranks[0][3])  # and the group's state continues in one process
    assert [next(back).keys for _ in range(3)] == keys[7:]
    back.close()
