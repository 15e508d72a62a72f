"""A loader state restored under other sequence settings says so: a warning where the position still
carries over, an error naming the setting where it cannot (energon failed with a bare AssertionError)."""

import json
import re
import warnings

import pytest

from vfm_data import make_loader

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8, streams=2)


def _state(path, **options):
    loader = make_loader(path, **{**OPTIONS, **options})
    for _ in range(3):
        next(loader)
    return json.loads(json.dumps(loader.state_dict()))


@pytest.mark.parametrize("change", [dict(packing_buffer=16), dict(seed=3), dict(max_seq_len=32)], ids=lambda c: next(iter(c)))
def test_a_changed_sequence_setting_warns_naming_it_and_continues(small_dataset, change):
    state = _state(small_dataset)
    with warnings.catch_warnings():  # the same settings: no warning
        warnings.simplefilter("error")
        make_loader(small_dataset, **OPTIONS).load_state_dict(state)
    resumed = make_loader(small_dataset, **{**OPTIONS, **change})
    (name, value), = change.items()
    with pytest.warns(UserWarning, match=rf"saved with other settings \({name}={OPTIONS.get(name, 0)!r} there, {value!r} here\)"):
        resumed.load_state_dict(state)
    assert len(next(resumed).keys) >= 2


@pytest.mark.parametrize("change,named", [(dict(shuffle_buffer=None), "shuffled"),
                                          (dict(blender="scheduled", blender_options={"schedule": [(0, [1.0])]}), "blender")],
                         ids=["shuffle-off", "blender"])
def test_a_setting_the_state_cannot_continue_under_is_refused_naming_it(small_dataset, change, named):
    state = _state(small_dataset)
    resumed = make_loader(small_dataset, **{**OPTIONS, **change})
    with pytest.raises(ValueError, match=rf"cannot continue with .*{named}"):
        resumed.load_state_dict(state)


def test_a_bucketed_blend_with_max_seq_len_is_refused_saying_it_does_not_pack(small_dataset):
    # it failed at the first batch: "SampleError: ... 'PackedSample' object has no attribute 'latent'"
    with pytest.raises(ValueError, match=r"blender 'bucketed' .* does not pack: drop max_seq_len=16"):
        make_loader(small_dataset, blender="bucketed", blender_options={"durations": [1], "batch_size": 2}, **OPTIONS)


def test_a_blend_with_other_datasets_is_refused_and_a_moved_grown_one_resumes(tmp_path):
    import shutil

    import torch

    from tests.data.helpers import meta, quiet, write_dataset
    from vfm_data import ShardWriter, prepare_dataset, write_blend

    root = tmp_path / "shards"
    a, b, c = (write_dataset(root / name, 12, prefix=name, seed=i) for i, name in enumerate("abc"))
    state = _state(write_blend(root / "blend.yaml", [(a, 1.0), (b, 1.0)]))
    # energon failed with a bare AssertionError for a third dataset, and silently applied a's position
    # to b (and b's to a) for a swapped order
    for entries, here in (([(a, 1.0), (b, 1.0), (c, 1.0)], ["a", "b", "c"]), ([(b, 1.0), (a, 1.0)], ["b", "a"])):
        other = make_loader(write_blend(root / "other.yaml", entries), **OPTIONS)
        expected = re.escape(f"datasets={['a', 'b']} there, {here} here")
        with pytest.raises(ValueError, match=expected + ".*same dataset folders in the same order"):
            other.load_state_dict(state)
    with ShardWriter(a, start_index=len(list(a.glob("*.tar")))) as w:  # a grows
        for i in range(4):
            w.write(f"a_new{i}", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    quiet(prepare_dataset, a)
    moved = shutil.move(str(root), str(tmp_path / "moved"))
    resumed = make_loader(f"{moved}/blend.yaml", **OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed.load_state_dict(state)
    assert next(resumed).keys


def test_a_bucketed_blend_under_another_batch_size_is_refused_naming_it(small_dataset):
    # energon failed at the first batch: "AssertionError: Got different batch size for group ...: 2 != 4"
    bucketed = dict(blender="bucketed", blender_options={"durations": [1], "batch_size": 2}, max_seq_len=None,
                    packing_buffer=None)
    state = _state(small_dataset, **bucketed)
    resumed = make_loader(small_dataset, **{**OPTIONS, **bucketed, "blender_options": {"durations": [1], "batch_size": 4}})
    with pytest.raises(ValueError, match=r"cannot continue with blender_options changed; the bucketed blend's saved "
                                         r"position holds partly filled buckets of the saved batch size"):
        resumed.load_state_dict(state)


def test_a_bucketed_blend_with_a_token_budget_continues_under_another_loader_batch_size(small_dataset):
    # its buckets' batch sizes come from tokens_per_batch alone (the loader's batch_size is not used)
    bucketed = dict(blender="bucketed", blender_options={"durations": [1], "tokens_per_batch": 64}, max_seq_len=None,
                    packing_buffer=None)
    state = _state(small_dataset, **bucketed)
    resumed = make_loader(small_dataset, **{**OPTIONS, **bucketed, "batch_size": 4})
    with pytest.warns(UserWarning, match=r"saved with other settings \(batch_size=2 there, 4 here\): loading continues"):
        resumed.load_state_dict(state)
    assert next(resumed).keys
