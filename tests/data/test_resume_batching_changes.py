"""A loader state resumed under another batch size, or with packing switched on or off, is refused
when it is loaded, naming the setting: energon keeps each stream's position as batches of the saved
size and shape, and failed at the first batch with a bare AssertionError ("Changing micro batch size
is not allowed without workers", "Class name mismatch: MapDataset != WebdatasetSampleLoaderDataset")
after vfm had warned that loading continues."""

import json

import pytest

from vfm_data import make_loader

PACKED = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8, streams=2)
UNPACKED = dict(patch_size=2, batch_size=1, streams=2)


def _state(path, **options):
    loader = make_loader(path, **options)
    for _ in range(3):
        next(loader)
    return json.loads(json.dumps(loader.state_dict()))


@pytest.mark.parametrize("saved,resumed,named", [
    (PACKED, {**PACKED, "batch_size": 4}, r"batch_size=2 there, 4 here"),
    (UNPACKED, {**UNPACKED, "batch_size": 2}, r"batch_size=1 there, 2 here"),
    (PACKED, {**PACKED, "max_seq_len": None, "packing_buffer": None}, r"packed=True there, False here"),
    (UNPACKED, {**UNPACKED, "max_seq_len": 16}, r"packed=False there, True here"),
], ids=["packed-batch-size", "unpacked-batch-size", "packing-off", "packing-on"])
def test_a_state_resumed_under_another_batch_size_or_packing_is_refused_when_loaded(small_dataset, saved, resumed, named):
    state = _state(small_dataset, **saved)
    loader = make_loader(small_dataset, **resumed)
    with pytest.raises(ValueError, match=rf"{named}.*cannot continue with .*changed; .*saved batch size and packing"):
        loader.load_state_dict(state)


def test_a_state_resumed_under_the_same_batching_continues_with_another_max_seq_len(small_dataset):
    # the refusal is only for what energon cannot restore: a new max_seq_len still continues (a warning)
    state = _state(small_dataset, **PACKED)
    loader = make_loader(small_dataset, **{**PACKED, "max_seq_len": 32})
    with pytest.warns(UserWarning, match=r"max_seq_len=16 there, 32 here\): loading continues"):
        loader.load_state_dict(state)
    assert next(loader).keys


def test_a_state_saved_before_packed_was_recorded_is_refused_with_packing_switched(small_dataset):
    # states saved before the "packed" setting existed hold max_seq_len, which tells it: a switch is
    # refused there too, not warned about and then failed on by energon at the first batch
    state = _state(small_dataset, **UNPACKED)
    del state["settings"]["packed"]
    loader = make_loader(small_dataset, **{**UNPACKED, "max_seq_len": 16})
    with pytest.raises(ValueError, match=r"packed=False there, True here.*cannot continue with packed changed"):
        loader.load_state_dict(state)
