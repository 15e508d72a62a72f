"""The loader-state codec rebuilds only the energon dataclasses on its allow-list, named in full;
the list matches what real loader states hold."""

from __future__ import annotations

import json

import pytest

from tests.data.helpers import write_dataset
from vfm_data import make_loader, write_blend
from vfm_data.state_codec import ALLOWED_CLASSES, decode_state, encode_state

SCHEDULE = [(0, [1.0, 0.0]), (4, [0.0, 1.0])]


def _class_names(value) -> set[str]:
    if isinstance(value, dict):
        found = {value["__dataclass__"]} if "__dataclass__" in value else set()
        return found.union(*(_class_names(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_class_names(v) for v in value))
    return set()


@pytest.fixture(scope="module")
def blend(tmp_path_factory):
    root = tmp_path_factory.mktemp("codec")
    return write_blend(root / "blend.yaml", [(write_dataset(root / n, 12, prefix=n, seed=i), 1.0) for i, n in enumerate("ab")])


@pytest.mark.parametrize("options", [
    dict(max_seq_len=16, packing_buffer=8),
    dict(max_seq_len=16, packing_buffer=8, blender="scheduled", blender_options={"schedule": SCHEDULE}),
    dict(blender="bucketed", blender_options={"durations": [1, 2, 4], "batch_size": 2}),
], ids=["weighted-packed", "scheduled", "bucketed"])
def test_real_loader_states_hold_exactly_the_allow_listed_classes_and_round_trip(blend, options):
    loader = make_loader(blend, patch_size=2, batch_size=2, streams=1, **options)
    for _ in range(3):
        next(loader)
    encoded = loader.state_dict()["stream_states"]["0"]
    assert _class_names(encoded) == ALLOWED_CLASSES  # a new energon state class shows up here first
    assert encode_state(decode_state(json.loads(json.dumps(encoded)))) == encoded


@pytest.mark.parametrize("name", ["megatron.energon.worker:WorkerConfig", "subprocess:Popen", "megatron.energon.savable_loader"])
def test_a_state_naming_another_class_is_refused_with_its_name_before_any_import(monkeypatch, name):
    state = {"__dataclass__": name, "fields": {}}
    monkeypatch.setattr("vfm_data.state_codec.importlib.import_module", lambda *_: pytest.fail("imported a module"))
    with pytest.raises(ValueError, match=f"loader state names class '{name}'; accepted: megatron.energon.flavors"):
        decode_state({"__dict__": {"inner": [state]}})


def test_encoding_an_unlisted_dataclass_is_refused_with_its_name():
    from megatron.energon import WorkerConfig

    with pytest.raises(TypeError, match="cannot encode loader state class megatron.energon.worker:WorkerConfig"):
        encode_state({"x": WorkerConfig(rank=0, world_size=1, num_workers=0)})
