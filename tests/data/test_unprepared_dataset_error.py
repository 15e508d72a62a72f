"""``UnpreparedDatasetError`` is an ``UntrustedDatasetError`` built by its parent's ``__init__`` (the
fields the parent sets, set the parent's way), with its own message: not a matter of trust."""

from __future__ import annotations

import pickle

import pytest

from vfm_data.trust import UnpreparedDatasetError, UntrustedDatasetError, check_dataset


def test_unprepared_dataset_error_runs_its_parents_init(tmp_path, monkeypatch):
    # the parent's __init__, instrumented: whatever it sets (today and tomorrow) a subclass gets only
    # by running it; the old subclass called ValueError.__init__ and copied four fields by hand
    ran = []
    parent_init = UntrustedDatasetError.__init__

    def recording_init(self, *args, **kwargs):
        ran.append(type(self).__name__)
        parent_init(self, *args, **kwargs)

    monkeypatch.setattr(UntrustedDatasetError, "__init__", recording_init)
    (tmp_path / "shard-000000.tar").write_bytes(b"")
    with pytest.raises(UnpreparedDatasetError):
        check_dataset(tmp_path)
    assert ran == ["UnpreparedDatasetError"]


def test_unprepared_dataset_error_has_its_parents_fields_and_its_own_message(tmp_path):
    with pytest.raises(UnpreparedDatasetError) as caught:
        check_dataset(tmp_path)  # an empty folder: neither prepared nor a blend
    err = caught.value
    parent = UntrustedDatasetError(tmp_path, "path", "x")
    assert set(vars(parent)) <= set(vars(err))
    assert (err.file, err.key, err.hint) == (str(tmp_path), "path", "")
    assert str(err) == f"vfm_data: {err.reason}" and "accepted:" in str(err)
    assert "trust" not in str(err)  # not the opt-in advice: trusting its code would not prepare it
    again = pickle.loads(pickle.dumps(err))  # crosses from loader workers as itself
    assert (type(again), str(again), vars(again)) == (UnpreparedDatasetError, str(err), vars(err))
