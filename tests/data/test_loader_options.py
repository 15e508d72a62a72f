"""make_loader refuses settings of the wrong type or range when it is called, naming the setting, the
value and what is accepted: not a ZeroDivisionError (batch_size=0, num_workers=-1, streams=0,
patch_size=0), energon's bare AssertionError (packing_buffer=0, dp_rank >= dp_world) or a seed of
"abc" taken as given; an unknown option lists the accepted ones."""

from __future__ import annotations

import pytest

from vfm_data import make_loader
from vfm_data.loader_options import LoaderOptionError

BASE = dict(patch_size=2, batch_size=2, max_seq_len=64)


@pytest.mark.parametrize("name, value, accepted", [
    ("batch_size", 0, "a whole number >= 1 (samples per step, or packs when packing)"),
    ("batch_size", "2", "a whole number >= 1"),
    ("batch_size", True, "a whole number >= 1"),
    ("num_workers", -1, "a whole number >= 0 (data worker processes; 0 reads in this process)"),
    ("num_workers", "1", "a whole number >= 0"),
    ("seed", "abc", "a whole number (the loader's seed)"),
    ("seed", 1.5, "a whole number"),
    ("patch_size", 0, "a whole number >= 1 (the model's spatial patch size)"),
    ("temporal_patch", 0, "a whole number >= 1"),
    ("max_seq_len", 0, "a whole number >= 1 or None"),
    ("streams", 0, "a whole number >= 1"),
    ("streams", -1, "a whole number >= 1"),
    ("shuffle_buffer", -1, "a whole number >= 0 or None"),
    ("packing_buffer", 0, "a whole number >= 1 or None"),
    ("latent_channels", 0, "a whole number >= 1 or None"),
    ("split_part", "", "a name (a non-empty string)"),
    ("trust_dataset_code", "yes", "True or False"),
    ("overlong", "x", "'drop' (skip a sample over max_seq_len tokens) or 'crop' (keep its first frames that fit, or the middle rows of one frame)"),
    ("overlong", None, "'drop'"),
    ("share", "broadcast", "'auto', 'gather' or 'turns'"),
])
def test_a_loader_setting_of_the_wrong_type_or_range_is_named_with_what_is_accepted(small_dataset, name, value, accepted):
    with pytest.raises(LoaderOptionError) as info:
        make_loader(small_dataset, **{**BASE, name: value})
    assert str(info.value).startswith(f"make_loader: {name}={value!r} is not accepted; accepted: {accepted}")


def test_a_task_encoder_made_directly_names_itself_when_refusing_an_overlong_policy():
    from vfm_data.task_encoder import VideoTaskEncoder

    with pytest.raises(LoaderOptionError, match=r"^VideoTaskEncoder: overlong='trim' is not accepted; accepted: 'drop' \("):
        VideoTaskEncoder(patch_size=2, max_seq_len=64, overlong="trim")


def test_a_data_parallel_rank_outside_the_world_is_refused(small_dataset):
    with pytest.raises(LoaderOptionError, match=r"dp_rank=3 is not accepted with dp_world=2; accepted: 0 <= dp_rank < dp_world"):
        make_loader(small_dataset, dp_rank=3, dp_world=2, **BASE)


def test_an_unknown_loader_option_lists_the_accepted_ones(small_dataset):
    with pytest.raises(TypeError, match=r"make_loader has no option micro_batch; accepted: path, patch_size, "
                                        r"batch_size, num_workers, group, streams, share, blender, .*seed"):
        make_loader(small_dataset, micro_batch=2, **BASE)


def test_an_unknown_loader_option_s_list_names_every_parameter_of_make_loader_and_every_loader_spec_field(small_dataset):
    import dataclasses
    import inspect

    from vfm_data.stream import LoaderSpec

    with pytest.raises(TypeError) as info:
        make_loader(small_dataset, micro_batch=2, **BASE)
    accepted = str(info.value).split("; accepted: ", 1)[1].split(", ")
    named = [p.name for p in inspect.signature(make_loader).parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert accepted[:len(named)] == named  # its own parameters first, in the signature's order
    assert set(accepted) == set(named) | {f.name for f in dataclasses.fields(LoaderSpec)}
    assert len(accepted) == len(set(accepted))


def test_numpy_whole_numbers_are_accepted(small_dataset):
    import numpy as np

    loader = make_loader(small_dataset, patch_size=np.int64(2), batch_size=2, max_seq_len=64, seed=np.int32(3))
    assert len(next(loader).keys) > 0


def test_a_state_saved_with_numpy_settings_resumes_under_plain_ones(small_dataset):
    import numpy as np

    saved = make_loader(small_dataset, patch_size=np.int64(2), batch_size=2, max_seq_len=np.int64(64))
    next(saved)
    resumed = make_loader(small_dataset, **BASE)
    resumed.load_state_dict(saved.state_dict())  # patch_size was saved as "np.int64(2)": refused as changed
    assert next(resumed).keys == next(saved).keys
