"""A run folder from elsewhere whose ``.vfm-lock`` is a named pipe (a tar of a run folder carries one):
the run is refused with one line naming it and saying what to do (``LockNotAFileError``, a
``FolderLockedError``, so every command prints it as it prints a held folder); it was a bare
``OSError: [Errno 22] Invalid argument`` (flock on a pipe). Nothing is removed, the pipe included."""

from __future__ import annotations

import os
import pickle

import pytest

from vfm_plugins import LOCK_NAME, FolderLock, FolderLockedError, LockNotAFileError


@pytest.mark.timeout(60)
def test_a_lock_file_that_is_a_named_pipe_is_refused_naming_it(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    os.mkfifo(folder / LOCK_NAME)
    with pytest.raises(LockNotAFileError) as caught:
        FolderLock(folder, command="vfm test").__enter__()
    message = str(caught.value)
    assert message == (f"{folder / LOCK_NAME} is not a regular file (a named pipe) where vfm keeps the folder's lock "
                       "file; no vfm run makes one: remove it and run again")
    assert isinstance(caught.value, FolderLockedError) and (folder / LOCK_NAME).is_fifo()
    assert str(pickle.loads(pickle.dumps(caught.value))) == message
