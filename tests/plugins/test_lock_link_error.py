"""``LockLinkError`` is a ``FolderLockedError`` built by its parent's ``__init__`` (the fields the
parent sets, set the parent's way) with its own message, and it crosses processes unchanged even
where the link is not there to read."""

from __future__ import annotations

import pickle

import pytest

from tests.planted_links import plant_link
from vfm_plugins import LOCK_NAME, FolderLock, FolderLockedError, LockLinkError


def test_lock_link_error_runs_its_parents_init(tmp_path, monkeypatch):
    # the parent's __init__, instrumented: whatever it sets (today and tomorrow) the subclass gets
    # only by running it; LockLinkError called RuntimeError.__init__ and copied four fields by hand
    ran = []
    parent_init = FolderLockedError.__init__

    def recording_init(self, *args, **kwargs):
        ran.append(type(self).__name__)
        parent_init(self, *args, **kwargs)

    monkeypatch.setattr(FolderLockedError, "__init__", recording_init)
    plant_link(tmp_path / "out" / LOCK_NAME, tmp_path / "home")
    with pytest.raises(LockLinkError):
        FolderLock(tmp_path / "out", command="vfm test").__enter__()
    assert ran == ["LockLinkError"]


def test_lock_link_error_has_its_parents_fields_its_own_message_and_pickles_without_the_link(tmp_path):
    folder = tmp_path / "out"
    plant_link(folder / LOCK_NAME, tmp_path / "home")
    with pytest.raises(LockLinkError) as caught:
        FolderLock(folder, command="vfm test").__enter__()
    err = caught.value
    parent = FolderLockedError(folder, folder / LOCK_NAME, None)
    assert set(vars(parent)) <= set(vars(err))
    assert (err.folder, err.path, err.holder, err.why) == (folder, folder / LOCK_NAME, None, "")
    assert str(err).startswith(f"{folder / LOCK_NAME} is a symbolic link (to {tmp_path / 'home' / LOCK_NAME})")
    assert "in use by another run" not in str(err)  # not the parent's message: no run holds it
    (folder / LOCK_NAME).unlink()  # the copy is read where the link is not (a Ray driver, another host)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again)) == (LockLinkError, str(err))
    assert (again.folder, again.path, again.holder, again.why) == (err.folder, err.path, None, "")
