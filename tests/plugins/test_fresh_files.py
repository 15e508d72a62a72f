"""vfm_plugins.files: files are written new and renamed over the target, never through a planted link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from vfm_plugins.files import fresh_file, replace_file


def test_a_target_that_is_a_link_is_replaced_and_the_linked_file_is_untouched(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").symlink_to(victim)
    replace_file(out / "summary.json", '{"ok": true}')
    assert victim.read_text() == "precious"
    assert not (out / "summary.json").is_symlink()
    assert (out / "summary.json").read_text() == '{"ok": true}'


def test_a_planted_link_at_the_old_temporary_name_is_not_followed(tmp_path: Path):
    """The curator used ``.NAME.PID.tmp``: a folder from elsewhere could hold that name as a link."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / f".summary.json.{os.getpid()}.tmp").symlink_to(victim)
    from vfm_curator.io.paths import atomic_write

    atomic_write(out / "summary.json", b"data")
    assert victim.read_text() == "precious"
    assert (out / "summary.json").read_bytes() == b"data"


def test_a_new_file_gets_the_permissions_the_umask_gives(tmp_path: Path):
    old = os.umask(0o027)
    try:
        replace_file(tmp_path / "a.bin", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o640


def test_a_failing_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path):
    target = tmp_path / "config.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with fresh_file(target, durable=True) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_a_temporary_file_is_new_each_time_named_by_prefix_and_suffix_with_the_umask_permissions(tmp_path):
    from vfm_plugins.files import temporary_file

    old = os.umask(0o027)
    try:
        a = temporary_file(tmp_path, prefix=".0003.partial.", suffix=".mp4")
        b = temporary_file(tmp_path, prefix=".0003.partial.", suffix=".mp4")
    finally:
        os.umask(old)
    assert a != b and a.name.startswith(".0003.partial.") and a.suffix == ".mp4" and a.stat().st_size == 0
    assert stat.S_IMODE(a.stat().st_mode) == 0o640


def test_fresh_file_with_a_suffix_names_its_temporary_file_so(tmp_path):
    with fresh_file(tmp_path / "0000.mp4", prefix=".0000.partial.", suffix=".mp4") as tmp:
        assert tmp.suffix == ".mp4" and tmp.name.startswith(".0000.partial.")
        tmp.write_bytes(b"video")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0000.mp4"]


def test_a_leftover_sweep_removes_a_regular_file_and_neither_follows_nor_removes_a_link(tmp_path):
    from vfm_plugins.files import remove_leftover

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / ".a.tmp").write_text("half")
    (tmp_path / ".b.tmp").symlink_to(victim)
    assert remove_leftover(tmp_path / ".a.tmp") and not remove_leftover(tmp_path / ".b.tmp")
    assert not remove_leftover(tmp_path / ".gone.tmp")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".b.tmp", "victim.txt"] and victim.read_text() == "precious"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    victim.chmod(0o600)
    return victim


def test_replace_file_writes_through_the_descriptor_it_created_never_through_a_link_swapped_in(tmp_path, monkeypatch):
    """Another process writing in the folder swaps the new temporary file for a link at once (here:
    as mkstemp returns); reopening it by name wrote the data into the link's target."""
    import tempfile

    import vfm_plugins.files as files

    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    real_mkstemp = tempfile.mkstemp

    def mkstemp_then_swapped(**kwargs):
        fd, name = real_mkstemp(**kwargs)
        os.unlink(name)
        os.symlink(victim, name)  # the racing process's move
        return fd, name

    monkeypatch.setattr(files.tempfile, "mkstemp", mkstemp_then_swapped)
    with pytest.raises(files.SwappedFileError, match="no longer the file written"):
        replace_file(out / "state.json", '{"step": 3}', durable=True)
    assert victim.read_text() == "precious" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert sorted(p.name for p in out.iterdir()) == []  # neither the link renamed in nor left behind


def test_rename_into_place_refuses_a_temporary_file_swapped_for_a_link_and_leaves_its_target_alone(tmp_path):
    """A writer that writes by name (PyAV, safetensors) hands the name back; if it is a link by then,
    the chmod by name changed the target's permissions and the rename put the link at the final name."""
    from vfm_plugins.files import SwappedFileError, rename_into_place, temporary_file

    victim = _victim(tmp_path)
    tmp = temporary_file(tmp_path, prefix=".shard.tar.tmp-", suffix="")
    tmp.write_bytes(b"a shard")
    tmp.unlink()
    tmp.symlink_to(victim)  # the racing process's move
    with pytest.raises(SwappedFileError, match="symbolic link"):
        rename_into_place(tmp, tmp_path / "shard.tar", durable=True)
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == "precious"
    assert not (tmp_path / "shard.tar").exists() and not (tmp_path / "shard.tar").is_symlink()


def test_rename_into_place_renames_the_file_written_with_the_umask_permissions(tmp_path):
    from vfm_plugins.files import rename_into_place, temporary_file

    tmp = temporary_file(tmp_path, prefix=".a.", suffix=".tmp")
    tmp.write_bytes(b"data")
    tmp.chmod(0o600)  # as safetensors makes its files
    old = os.umask(0o027)
    try:
        rename_into_place(tmp, tmp_path / "a.bin", durable=True)
    finally:
        os.umask(old)
    assert (tmp_path / "a.bin").read_bytes() == b"data" and stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]
