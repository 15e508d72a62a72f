"""A subset group that resumes and saves again (2 real gloo processes, steps shared in turns): the
second state holds every stream's newest position, and its skip counts once, not once per rank."""

import json

import pytest
import torch.distributed as dist

from tests.data.helpers import in_forked_group
from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, streams=4, shuffle_buffer=None, max_seq_len=12, packing_buffer=8,
               overlong="drop",  # a clip of 4 frames (16 tokens) is dropped and counted
               share="turns")


def _run(rank, world, path):
    first = make_loader(path, group=dist.group.WORLD, **OPTIONS)
    for _ in range(2):
        next(first)
    state = json.loads(json.dumps(first.state_dict()))
    first.close()
    resumed = make_loader(path, group=dist.group.WORLD, **OPTIONS)
    resumed.load_state_dict(state)
    for _ in range(3):  # steps 2, 3, 4: stream 0 (rank 0) advances again after the resume
        next(resumed)
    second = json.loads(json.dumps(resumed.state_dict()))
    resumed.close()
    return {"first": state, "second": second}


@pytest.mark.filterwarnings("ignore::vfm_data.errors.DataWarning")  # the overlong drops
def test_a_state_saved_after_a_resume_continues_where_the_straight_sequence_is(small_dataset):
    out = in_forked_group(_run, 2, str(small_dataset))[0]
    straight = make_loader(small_dataset, **OPTIONS)
    keys = [next(straight).keys for _ in range(5)]
    reference = straight.state_dict()
    keys += [next(straight).keys for _ in range(4)]
    straight.close()
    one = make_loader(small_dataset, **OPTIONS)
    one.load_state_dict(out["second"])
    assert [next(one).keys for _ in range(4)] == keys[5:]  # step 8 is stream 0's: not a re-read of step 4
    one.close()
    # each skip once: not the restored counts again from every rank of the group
    assert (out["second"]["counts"], out["second"]["shard_counts"]) == (reference["counts"], reference["shard_counts"])
