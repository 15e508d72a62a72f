"""The loader state inside a checkpoint (ranks/rank_*.json) is data: an allow-listed energon class is
rebuilt from the fields it declares only; any other attribute a crafted state names is refused."""

from __future__ import annotations

import pytest

from vfm_data.state_codec import decode_state

SLICE = "megatron.energon.flavors.webdataset.sample_loader:SliceState"


def test_a_state_setting_an_undeclared_attribute_is_refused():
    state = {"__dataclass__": SLICE, "fields": {"index": 0, "current": 0, "__dict__": {"__dict__": {"x": 1}}}}
    with pytest.raises(ValueError, match=r"loader state of .*SliceState names field '__dict__'; accepted: current, index"):
        decode_state(state)


def test_declared_fields_still_rebuild_the_class():
    obj = decode_state({"__dataclass__": SLICE, "fields": {"index": 3, "current": 5}})
    assert (type(obj).__name__, obj.index, obj.current) == ("SliceState", 3, 5)


def test_a_crafted_state_is_refused_when_the_loader_takes_it_not_at_the_first_batch(small_dataset):
    from vfm_data import make_loader

    options = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8)
    loader = make_loader(small_dataset, **options)
    next(loader)
    state = loader.state_dict()
    name = next(iter(state["stream_states"]))
    state["stream_states"][name] = {"__dataclass__": "os:system", "fields": {}}
    with pytest.raises(ValueError, match=r"loader state names class 'os:system'; accepted: "):
        make_loader(small_dataset, **options).load_state_dict(state)
