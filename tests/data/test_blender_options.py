"""Blender options of the wrong type or range are refused when the loader is made, naming the
blender, the option, the value and what is accepted (not a bare ``TypeError: '<' not supported`` or
a batch size of ``"4"`` / ``True`` / ``0`` taken as given)."""

from __future__ import annotations

import pytest

from vfm_data import make_loader, write_blend
from vfm_data.blenders.options import BlenderOptionError

OPTIONS = dict(patch_size=2, batch_size=2)
DURATIONS = "a non-empty list of latent frame counts, whole numbers >= 1"


@pytest.mark.parametrize("durations", [["a"], "12", 4, [], [0], [-1], [1.5], [True]],
                         ids=["string-in-list", "string", "int", "empty", "zero", "negative", "float", "bool"])
def test_bucketed_durations_of_the_wrong_type_or_range_name_the_option_and_what_is_accepted(small_dataset, durations):
    with pytest.raises(BlenderOptionError) as info:
        make_loader(small_dataset, blender="bucketed", blender_options={"durations": durations, "batch_size": 2}, **OPTIONS)
    assert str(info.value).startswith(f"blender 'bucketed': durations={durations!r} is not accepted; accepted: {DURATIONS}")


@pytest.mark.parametrize("option, value", [("batch_size", 0), ("batch_size", "4"), ("batch_size", True),
                                           ("batch_size", 2.5), ("tokens_per_batch", -5), ("tokens_per_batch", "64")])
def test_bucketed_batch_sizes_must_be_positive_whole_numbers(small_dataset, option, value):
    with pytest.raises(BlenderOptionError, match=f"blender 'bucketed': {option}={value!r} is not accepted; "
                                                 "accepted: a whole number of"):
        make_loader(small_dataset, blender="bucketed", blender_options={"durations": [1, 2], option: value}, **OPTIONS)


@pytest.mark.parametrize("schedule, named", [
    (5, "schedule=5"), ([], "schedule=[]"), ([(0,)], "schedule[0]=(0,)"), ([("x", [1.0])], "schedule[0] samples='x'"),
    ([(0, ["a"])], "schedule[0] weights=['a']"), ([(0, 1.0)], "schedule[0] weights=1.0"),
    ([(0, [0.0])], "schedule[0] weights=[0.0]"), ([(10, [1.0]), (5, [1.0])], "schedule[1] samples=5"),
])
def test_scheduled_blend_schedules_of_the_wrong_shape_name_the_milestone(small_dataset, schedule, named):
    with pytest.raises(BlenderOptionError) as info:
        make_loader(small_dataset, blender="scheduled", blender_options={"schedule": schedule}, max_seq_len=64, **OPTIONS)
    assert str(info.value).startswith(f"blender 'scheduled': {named} is not accepted; accepted: ")


def test_a_schedule_with_another_weight_count_than_the_blend_has_datasets_is_refused_when_the_loader_is_made(
        small_dataset, tmp_path):
    blend = write_blend(tmp_path / "blend.yaml", [(small_dataset, 1.0), (small_dataset, 1.0)])
    with pytest.raises(BlenderOptionError, match=r"accepted: 2 weights per milestone \(this blend has 2 datasets; "
                                                 r"one weight each, in the blend's order\), not 3"):
        make_loader(blend, blender="scheduled", blender_options={"schedule": [(0, [1.0, 0.0, 0.0])]}, max_seq_len=64,
                    **OPTIONS)


def test_blender_options_must_be_a_mapping(small_dataset):
    with pytest.raises(ValueError, match=r"blender_options=\[\('durations', \[1\]\)\]: accepted a mapping"):
        make_loader(small_dataset, blender="bucketed", blender_options=[("durations", [1])], **OPTIONS)


def test_blender_options_none_means_no_options(small_dataset):
    loader = make_loader(small_dataset, blender_options=None, max_seq_len=64, **OPTIONS)
    assert loader.spec.blender_options == {}
