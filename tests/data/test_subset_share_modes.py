"""How a subset group shares a step (``share=``): what each mode accepts, and which saved positions a
loader of another group size or mode continues (one process's sequence) or refuses (gathered parts)."""

import json

import pytest

from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, streams=4, shuffle_buffer=None, max_seq_len=16, packing_buffer=8)
BUCKETED = dict(patch_size=2, batch_size=2, blender="bucketed", blender_options={"durations": [1, 2, 4], "batch_size": 2})


def _state(small_dataset, **saved):
    loader = make_loader(small_dataset, **OPTIONS)
    next(loader)
    state = json.loads(json.dumps(loader.state_dict()))
    loader.close()
    state.update(saved)
    return state


def test_a_gathered_position_of_another_group_size_is_refused_naming_both(small_dataset):
    state = _state(small_dataset, group_size=2, share="gather")
    loader = make_loader(small_dataset, **OPTIONS)
    with pytest.raises(ValueError, match=r"subset group of 2 rank\(s\) sharing steps by 'gather'.*1 sharing"):
        loader.load_state_dict(state)


def test_a_position_read_in_turns_continues_in_one_process(small_dataset):
    one = make_loader(small_dataset, **OPTIONS)
    expected = [next(one).keys for _ in range(3)][1:]
    one.close()
    loader = make_loader(small_dataset, share="turns", **OPTIONS)
    loader.load_state_dict(_state(small_dataset, group_size=2, share="turns"))
    assert [next(loader).keys for _ in range(2)] == expected
    loader.close()


def test_the_state_records_how_steps_were_shared(small_dataset):
    assert _state(small_dataset)["share"] == "gather"
    loader = make_loader(small_dataset, share="turns", **OPTIONS)
    assert loader.state_dict()["share"] == "turns"


def test_share_accepts_only_its_modes_and_a_bucketed_blend_cannot_gather(small_dataset):
    with pytest.raises(ValueError, match=r"make_loader: share='parts' is not accepted; accepted: 'auto', 'gather' or 'turns'"):
        make_loader(small_dataset, share="parts", **OPTIONS)
    with pytest.raises(ValueError, match="cannot be gathered from parts"):
        make_loader(small_dataset, share="gather", **BUCKETED)
