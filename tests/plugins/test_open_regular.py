"""vfm_plugins.files.open_regular: the one way vfm packages open a file from a folder from elsewhere,
so a named pipe there is refused at once, never waited on (curate inputs and state, lock files, format
markers, written temporary files)."""

from __future__ import annotations

import errno
import os

import pytest

from vfm_plugins.files import NotRegularFileError, open_regular, read_regular


@pytest.mark.timeout(30)
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        open_regular(tmp_path / "fifo")


def test_a_folder_is_refused_naming_it(tmp_path):
    with pytest.raises(OSError) as info:  # IsADirectoryError for O_RDWR, NotRegularFileError for O_RDONLY
        open_regular(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_a_link_is_refused_unless_links_are_followed(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "link").symlink_to("a.json")
    with pytest.raises(OSError) as info:
        open_regular(tmp_path / "link")
    assert info.value.errno == errno.ELOOP
    fd = open_regular(tmp_path / "link", follow_links=True)
    with os.fdopen(fd) as fh:
        assert fh.read() == "{}"


def test_a_regular_file_reads_and_writes_as_usual(tmp_path):
    fd = open_regular(tmp_path / "new", os.O_RDWR | os.O_CREAT, 0o644)
    with os.fdopen(fd, "r+") as fh:
        fh.write("x" * 100_000)
        fh.seek(0)
        assert fh.read() == "x" * 100_000


@pytest.mark.timeout(30)
def test_read_regular_refuses_a_named_pipe_and_reads_a_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFileError):
        read_regular(tmp_path / "fifo")
    (tmp_path / "a").write_bytes(b"abc")
    assert read_regular(tmp_path / "a") == b"abc"
