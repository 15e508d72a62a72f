"""A loader state (in a checkpoint's ranks/rank_*.json) from a newer vfm-data is refused in one line
naming its version, the version read and the upgrade, before any of its fields is read."""

from __future__ import annotations

import pytest

from tests.format_versions import assert_one_line_naming
from vfm_data.loader import STATE_VERSION
from vfm_plugins.formats import FormatVersionError

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8)


@pytest.fixture
def state(small_dataset):
    from vfm_data import make_loader

    loader = make_loader(small_dataset, **OPTIONS)
    next(loader)
    return loader.state_dict()


def test_a_loader_state_of_a_newer_version_is_refused_naming_the_version_and_the_upgrade(small_dataset, state):
    from vfm_data import make_loader

    state["version"] = STATE_VERSION + 1
    del state["streams"]  # a newer layout: refused for its version, not as a KeyError on a field it moved
    with pytest.raises(FormatVersionError) as info:
        make_loader(small_dataset, **OPTIONS).load_state_dict(state)
    message = str(info.value)
    assert isinstance(info.value, ValueError)  # what load_state_dict raised before: a caller catching it still does
    assert_one_line_naming(message, f"format version {STATE_VERSION + 1}", "newer vfm", f"reads version {STATE_VERSION}",
                           "pip install -U vfm-data")


def test_a_loader_state_without_a_version_is_refused_as_not_a_vfm_loader_state(small_dataset, state):
    from vfm_data import make_loader

    del state["version"]
    with pytest.raises(FormatVersionError, match="has no vfm-data loader state format version"):
        make_loader(small_dataset, **OPTIONS).load_state_dict(state)


def test_resuming_a_checkpoint_whose_loader_state_is_newer_is_a_checkpoint_format_error_naming_the_rank_file(
        small_dataset, state, tmp_path):
    # not "does not fit this run's loader": the run fits, this vfm-data is too old to read the state
    from vfm_data import make_loader
    from vfm_parallel.checkpoint_integrity import CheckpointFormatError
    from vfm_parallel.trainer.resume import restore_loader

    state["version"] = STATE_VERSION + 1
    with pytest.raises(CheckpointFormatError) as info:
        restore_loader(tmp_path / "step_00000004", make_loader(small_dataset, **OPTIONS), 0, {"loader": state})
    message = str(info.value)
    assert "does not fit" not in message
    assert_one_line_naming(message, f"checkpoint {tmp_path / 'step_00000004'}", "ranks/rank_00000.json",
                           f"format version {STATE_VERSION + 1}", "pip install -U vfm-data")
