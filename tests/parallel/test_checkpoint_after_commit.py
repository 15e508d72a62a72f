"""What a checkpoint save does around its commit when the file system fails there: pruning after the
commit is best effort (rank 0 alone prunes while the others wait at a barrier), the failure message's
listing of the checkpoints is best effort (the failed save's cleanup runs), and a failure after the
commit's rename says the step is in place instead of that nothing of it was committed.

The failures are injected at the os calls (listing, fsync, lstat, rename) of one path, in the rank's
own process: the tests run as root, whom a chmod does not stop."""

from __future__ import annotations

import errno
import os

import torch
import torch.distributed as dist

from tests.gloo import spawn
from tests.parallel.test_checkpoint_integrity import _linear
from vfm_parallel import checkpoint as ckpt
from vfm_parallel.checkpoint_folders import prune

#: a hang is a failure of the test, not a stuck test run (a two-rank save here takes seconds)
TIMEOUT_S = 90


def _loads_with(path, value: float) -> bool:
    model = _linear(0.0)
    ckpt.load(path, model=model)
    return all(torch.equal(p, torch.full_like(p, value)) for p in model.parameters())


class _Unlistable:
    """``os.scandir`` / ``os.listdir`` of ``root`` itself raise EIO while active (other paths list)."""

    def __init__(self, root, *, scandir=True, listdir=False) -> None:
        self.root, self.scandir, self.listdir = os.fspath(root), scandir, listdir
        self.real_scandir, self.real_listdir = os.scandir, os.listdir

    def _refuse(self, path):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path) == self.root:
            raise OSError(errno.EIO, os.strerror(errno.EIO), self.root)

    def __enter__(self):
        def scandir(path="."):
            self._refuse(path)
            return self.real_scandir(path)

        def listdir(path="."):
            self._refuse(path)
            return self.real_listdir(path)

        if self.scandir:
            os.scandir = scandir
        if self.listdir:
            os.listdir = listdir
        return self

    def __exit__(self, *exc) -> None:
        os.scandir, os.listdir = self.real_scandir, self.real_listdir


def _save_whose_prune_cannot_list_on_rank_0(rank, world, root):
    for step in (1, 2):
        ckpt.save(root, step, model=_linear(step), rank_state={"rank": rank}, keep=1)
    if rank == 0:
        with _Unlistable(root):  # rank 0 alone prunes, after the commit, the others at the barrier
            ckpt.save(root, 3, model=_linear(3.0), rank_state={"rank": rank}, keep=1)
    else:
        ckpt.save(root, 3, model=_linear(3.0), rank_state={"rank": rank}, keep=1)
    after_failed_prune = sorted(os.listdir(root))
    dist.barrier()  # else rank 0 may make step 4's folder before rank 1 lists (a save ends at a barrier, then races)
    ckpt.save(root, 4, model=_linear(4.0), rank_state={"rank": rank}, keep=1)  # listable again: pruned
    return {"after_failed_prune": after_failed_prune, "after_next": sorted(os.listdir(root)),
            "loads": _loads_with(ckpt.latest(root), 4.0)}


def test_a_root_that_cannot_be_listed_when_rank_0_prunes_leaves_the_save_committed_on_every_rank_instead_of_a_hang(tmp_path):
    results = spawn(_save_whose_prune_cannot_list_on_rank_0, 2, tmp_path, timeout=TIMEOUT_S)
    for out in results:
        assert out["after_failed_prune"] == ["step_00000002", "step_00000003"], out  # committed, not pruned
        assert out["after_next"] == ["step_00000004"] and out["loads"], out


def test_prune_removes_the_old_checkpoints_even_when_their_aside_copies_cannot_be_listed(tmp_path):
    for step in (1, 2, 3):
        ckpt.save(tmp_path, step, model=_linear(step))
    with _Unlistable(tmp_path, scandir=False, listdir=True):  # list_checkpoints lists, _asides_of cannot
        prune(tmp_path, 1)
    assert sorted(os.listdir(tmp_path)) == ["step_00000003"]
    ckpt.save(tmp_path, 4, model=_linear(4.0))
    with _Unlistable(tmp_path):  # the checkpoints cannot be listed: nothing removed, and no error
        prune(tmp_path, 1)
    assert sorted(os.listdir(tmp_path)) == ["step_00000003", "step_00000004"]


def _failed_save_whose_root_cannot_be_listed_on_rank_0(rank, world, root):
    ckpt.save(root, 1, model=_linear(1.0), rank_state={"rank": rank})
    rank_state = {"rank": rank, "seen": {1, 2}} if rank == 1 else {"rank": rank}  # json refuses a set on rank 1
    try:
        with _Unlistable(root, scandir=(rank == 0)):
            ckpt.save(root, 2, model=_linear(2.0), rank_state=rank_state)
        error = None
    except ckpt.CheckpointSaveError as exc:
        error = str(exc)
    return {"error": error, "names": sorted(os.listdir(root)), "loads": _loads_with(ckpt.latest(root), 1.0)}


def test_a_failed_save_whose_root_cannot_be_listed_for_its_message_still_fails_alike_and_removes_its_folder(tmp_path):
    results = spawn(_failed_save_whose_root_cannot_be_listed_on_rank_0, 2, tmp_path, timeout=TIMEOUT_S)
    errors = [out["error"] for out in results]
    assert errors[0] is not None and errors[0] == errors[1], errors
    assert "TypeError: Object of type set is not JSON serializable" in errors[0], errors[0]
    assert (f"nothing of it was committed and the checkpoints under {tmp_path} could not be listed "
            f"(OSError: [Errno {errno.EIO}] {os.strerror(errno.EIO)}") in errors[0], errors[0]
    for out in results:  # the temporary folder removed, step 1 still whole
        assert out["names"] == ["step_00000001"] and out["loads"], out


def _fails_for(path, real):
    """``real`` (os.fsync or os.lstat) raising EIO for ``path`` (a file descriptor's or a name's).
    Compared by name, not through realpath, which itself calls os.lstat."""
    names = {os.path.abspath(path), os.path.realpath(path)}

    def call(target, *args, **kwargs):
        named = os.readlink(f"/proc/self/fd/{target}") if isinstance(target, int) else os.path.abspath(target)
        if named in names:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(target, *args, **kwargs)

    return call


def _save_error(root, step, value) -> str:
    try:
        ckpt.save(root, step, model=_linear(value))
    except ckpt.CheckpointSaveError as exc:
        return str(exc)
    raise AssertionError("the save reported no failure")


def test_a_folder_sync_failing_after_the_rename_says_the_step_is_in_place_not_that_nothing_was_committed(tmp_path, monkeypatch):
    ckpt.save(tmp_path, 1, model=_linear(1.0))
    monkeypatch.setattr(os, "fsync", _fails_for(tmp_path, os.fsync))  # the root's, after the rename
    error = _save_error(tmp_path, 2, 2.0)
    assert "nothing of it was committed" not in error, error
    assert f"after its rename, syncing the folder {tmp_path} failed: OSError: [Errno {errno.EIO}]" in error, error
    assert f"{ckpt.step_dir(tmp_path, 2)} is in place, written whole, but a crash may undo its rename" in error, error
    assert ckpt.latest(tmp_path) == ckpt.step_dir(tmp_path, 2) and _loads_with(ckpt.latest(tmp_path), 2.0)

    error = _save_error(tmp_path, 2, 3.0)  # a re-save: its previous copy stays until the folder is synced
    asides = [n for n in os.listdir(tmp_path) if n.startswith(".old-step_00000002-")]
    assert len(asides) == 1 and f"the step's previous copy is kept as {asides[0]}" in error, (error, asides)
    monkeypatch.undo()
    assert _loads_with(ckpt.step_dir(tmp_path, 2), 3.0)


def test_a_check_failing_after_the_rename_says_the_step_is_in_place_unchecked(tmp_path, monkeypatch):
    final = ckpt.step_dir(tmp_path, 1)
    real_rename, real_lstat = os.rename, os.lstat

    def rename_then_refuse_lstat(src, dst, *args, **kwargs):
        real_rename(src, dst, *args, **kwargs)
        if os.fspath(dst) == os.fspath(final):  # the commit: the check after it cannot stat the folder
            monkeypatch.setattr(os, "lstat", _fails_for(final, real_lstat))

    monkeypatch.setattr(os, "rename", rename_then_refuse_lstat)
    error = _save_error(tmp_path, 1, 1.0)
    monkeypatch.undo()
    assert "nothing of it was committed" not in error, error
    assert (f"after its rename, checking that {final} is the folder this save made failed: "
            f"OSError: [Errno {errno.EIO}]") in error, error
    assert f"{final} is in place but unchecked" in error, error
    assert ckpt.latest(tmp_path) == final and _loads_with(final, 1.0)


def test_a_folder_swapped_in_at_the_rename_is_named_and_the_steps_previous_copy_is_kept(tmp_path, monkeypatch):
    ckpt.save(tmp_path, 1, model=_linear(1.0))
    final, foreign = ckpt.step_dir(tmp_path, 1), tmp_path / "elsewhere"
    real_rename = os.rename

    def swap_then_rename(src, dst, *args, **kwargs):
        if os.fspath(dst) == os.fspath(final) and os.path.basename(src).startswith(".tmp-"):
            real_rename(src, foreign)  # another process takes the save's folder and leaves its own
            os.mkdir(src)
        real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", swap_then_rename)
    error = _save_error(tmp_path, 1, 2.0)
    monkeypatch.undo()
    asides = [n for n in os.listdir(tmp_path) if n.startswith(".old-step_00000001-")]
    assert "nothing of it was committed" not in error, error
    assert f"{final} is not the folder this save made: another process replaced its temporary folder" in error
    assert len(asides) == 1 and f"{final} holds that other folder; the step's previous copy is kept as {asides[0]}" in error
    assert _loads_with(tmp_path / asides[0], 1.0)  # the good copy, not removed
