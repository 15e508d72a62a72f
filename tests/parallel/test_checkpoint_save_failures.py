"""A checkpoint save that fails on one rank, in any phase and with any exception, fails on every rank
together with one ``CheckpointSaveError`` naming the step, the rank and what failed: no rank is left
waiting in the next collective, and none goes on believing the save done. The save's temporary folder
is removed and the checkpoint before it stays the newest, loadable."""

from __future__ import annotations

import errno
import os

import pytest
import torch

from tests.gloo import spawn
from tests.parallel.test_checkpoint_integrity import _linear
from vfm_parallel import checkpoint as ckpt
from vfm_parallel import checkpoint_integrity

#: a hang is a failure of the test, not a stuck test run (a two-rank save here takes seconds)
TIMEOUT_S = 90


def _outcome(root, error):
    """What a rank sees after its second save: the error (or None), the root's names, and the newest
    checkpoint loaded (its step; whether its weights are the first save's, all ones)."""
    model = _linear(0.0)
    state, _ = ckpt.load(ckpt.latest(root), model=model)
    return {"error": error, "names": sorted(os.listdir(root)), "step": state["step"],
            "weights": all(torch.equal(p, torch.ones_like(p)) for p in model.parameters())}


def _second_save_error(root, rank_state, **kwargs):
    """Save step 2 over step 1: None, or the one line of the CheckpointSaveError every rank raises."""
    try:
        ckpt.save(root, 2, model=_linear(2.0), rank_state=rank_state, **kwargs)
    except ckpt.CheckpointSaveError as exc:
        return str(exc)
    return None


def _second_save_fails_on_rank_1(rank, world, root, how):
    ckpt.save(root, 1, model=_linear(1.0), rank_state={"rank": rank})  # the checkpoint that must survive
    rank_state = {"rank": rank}
    real_hash_file = checkpoint_integrity.hash_file
    if how == "unreadable" and rank == 1:

        # what reading a file the process may not read raises (the tests run as root, whom a
        # chmod does not stop): rank 1 hashes ranks/rank_00001.json, the manifest's 2nd file of 2 ranks
        def refused_on_this_rank(path, sync=False):
            if path.name == "rank_00001.json":
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_hash_file(path, sync)

        checkpoint_integrity.hash_file = refused_on_this_rank
    if how == "not json" and rank == 1:
        rank_state = {"rank": rank, "seen": {1, 2}}  # a set: json refuses it on this rank alone
    try:
        error = _second_save_error(root, rank_state=rank_state)
    finally:
        checkpoint_integrity.hash_file = real_hash_file  # readable again: the load below hashes it too
    return _outcome(root, error)


def _assert_failed_together(results, root):
    errors = [out["error"] for out in results]
    assert errors[0] is not None and errors[0] == errors[1], errors  # every rank, the same line
    assert "\n" not in errors[0]
    assert f"saving checkpoint {ckpt.step_dir(root, 2)} failed on rank 1" in errors[0]
    assert f"the newest committed checkpoint, {ckpt.step_dir(root, 1)}, is untouched" in errors[0]
    for out in results:  # no temporary folder left, step 1 still the newest and whole
        assert out["names"] == ["step_00000001"] and out["step"] == 1 and out["weights"]
    return errors[0]


def test_a_file_unreadable_on_one_rank_when_the_manifest_hashes_it_fails_the_save_on_every_rank(tmp_path):
    results = spawn(_second_save_fails_on_rank_1, 2, tmp_path, "unreadable", timeout=TIMEOUT_S)
    error = _assert_failed_together(results, tmp_path)
    assert "ranks/rank_00001.json" in error and "Permission denied" in error, error
    assert "does not read back" in error and "Check the file system" in error


def test_an_exception_raised_on_one_rank_alone_fails_the_save_on_every_rank_instead_of_a_hang(tmp_path):
    results = spawn(_second_save_fails_on_rank_1, 2, tmp_path, "not json", timeout=TIMEOUT_S)
    error = _assert_failed_together(results, tmp_path)
    assert "TypeError: Object of type set is not JSON serializable" in error, error


def test_a_single_process_save_with_an_unreadable_file_is_a_save_error_and_leaves_no_temporary_folder(tmp_path, monkeypatch):
    ckpt.save(tmp_path, 1, model=_linear(1.0))
    real_hash_file = checkpoint_integrity.hash_file

    def refused(path, sync=False):
        if path.name == "state.json":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_hash_file(path, sync)

    monkeypatch.setattr(checkpoint_integrity, "hash_file", refused)
    try:
        ckpt.save(tmp_path, 2, model=_linear(2.0))
    except ckpt.CheckpointSaveError as exc:
        error = str(exc)
    else:
        raise AssertionError("the save went on past a file it could not read")
    assert "state.json, written by this save, does not read back: Permission denied" in error, error
    assert sorted(os.listdir(tmp_path)) == ["step_00000001"]


def _save_with_a_link_planted_by_rank_1(rank, world, root, outside, kind):
    """Rank 1 writes a symbolic link into the folder being saved (as a storage writer or hook writing
    there might); sealing must refuse it: hashed through, the checkpoint would commit and never load."""
    ckpt.save(root, 1, model=_linear(1.0), rank_state={"rank": rank})
    real_write_json = ckpt._write_json

    def write_then_link(path, data):
        real_write_json(path, data)
        if rank == 1 and path.name == "rank_00001.json":
            (path.parent / f"linked_{kind}").symlink_to(outside, target_is_directory=(kind == "folder"))

    ckpt._write_json = write_then_link
    try:
        error = _second_save_error(root, rank_state={"rank": rank})
    finally:
        ckpt._write_json = real_write_json
    return _outcome(root, error)


def _outside(tmp_path, kind):
    outside = tmp_path / f"outside_{kind}"
    if kind == "folder":
        outside.mkdir()
        (outside / "data.bin").write_bytes(b"elsewhere")
    else:
        outside.write_bytes(b"elsewhere")
    return outside


def test_a_symbolic_link_in_the_folder_being_saved_fails_the_save_on_every_rank_naming_it(tmp_path):
    for kind in ("file", "folder"):  # a linked file was hashed through, a linked folder skipped: both committed
        root = tmp_path / kind
        outside = _outside(tmp_path, kind)
        results = spawn(_save_with_a_link_planted_by_rank_1, 2, root, outside, kind, timeout=TIMEOUT_S)
        errors = [out["error"] for out in results]
        assert errors[0] is not None and errors[0] == errors[1], errors
        assert "\n" not in errors[0]
        assert f"saving checkpoint {ckpt.step_dir(root, 2)} failed" in errors[0], errors[0]
        assert f"ranks/linked_{kind} is a symbolic link to {outside}" in errors[0], errors[0]
        assert "loading refuses links" in errors[0], errors[0]
        assert f"the newest committed checkpoint, {ckpt.step_dir(root, 1)}, is untouched" in errors[0]
        for out in results:
            assert out["names"] == ["step_00000001"] and out["step"] == 1 and out["weights"], out
        assert outside.exists() and (kind == "file" or (outside / "data.bin").read_bytes() == b"elsewhere")


def test_a_single_process_save_refuses_a_symbolic_link_in_its_folder_naming_it(tmp_path, monkeypatch):
    outside = _outside(tmp_path, "file")
    root = tmp_path / "root"
    real_write_json = ckpt._write_json

    def write_then_link(path, data):
        real_write_json(path, data)
        if path.name == "state.json":
            (path.parent / "tensors" / "extra.safetensors").symlink_to(outside)

    monkeypatch.setattr(ckpt, "_write_json", write_then_link)
    try:
        ckpt.save(root, 1, model=_linear(1.0))
    except ckpt.CheckpointSaveError as exc:
        error = str(exc)
    else:
        raise AssertionError("a checkpoint holding a link committed; loading refuses it")
    assert f"tensors/extra.safetensors is a symbolic link to {outside}" in error, error
    assert "no checkpoint was committed before" in error
    assert os.listdir(root) == [] and outside.read_bytes() == b"elsewhere"


def _save_while_rank_0_cannot_list(rank, world, root, code):
    """Listing the folder being sealed fails (a subfolder that cannot be read) on rank 0; before its
    gather, that rank paired with the other ranks' next collective. (os.scandir refusing is what an
    unreadable folder gives; the tests run as root, whom a chmod does not stop.)"""
    ckpt.save(root, 1, model=_linear(1.0), rank_state={"rank": rank})
    real_scandir = os.scandir

    def refused_in_the_save_folder(path="."):
        named = isinstance(path, (str, os.PathLike))  # (rmtree lists by file descriptor)
        if rank == 0 and named and os.fspath(path).endswith("/ranks") and "/.tmp-step_" in os.fspath(path):
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real_scandir(path)

    os.scandir = refused_in_the_save_folder
    try:
        error = _second_save_error(root, rank_state={"rank": rank})
    finally:
        os.scandir = real_scandir
    return _outcome(root, error)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO])
def test_a_folder_that_cannot_be_listed_while_sealing_fails_the_save_on_every_rank_instead_of_a_hang(tmp_path, code):
    # EIO raised on rank 0 before its gather, pairing it with the other ranks' next collective; EACCES
    # was skipped by pathlib's rglob, leaving the folder's files out of the manifest
    results = spawn(_save_while_rank_0_cannot_list, 2, tmp_path, code, timeout=TIMEOUT_S)
    errors = [out["error"] for out in results]
    assert errors[0] is not None and errors[0] == errors[1], errors
    assert "\n" not in errors[0]
    assert f"saving checkpoint {ckpt.step_dir(tmp_path, 2)} failed on rank 0" in errors[0], errors[0]
    assert f"ranks, a folder of this save, cannot be listed: {os.strerror(code)}" in errors[0], errors[0]
    for out in results:
        assert out["names"] == ["step_00000001"] and out["step"] == 1 and out["weights"], out


class _EmaFailingOnRank1:
    """An EMA whose ``state_dict`` raises on rank 1 alone: the save gathers the tensors to write before
    DCP's own collectives, so that rank failed there while the others went on into DCP's."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def state_dict(self):
        if self.rank == 1:
            raise RuntimeError("EMA shadow weights are on another device")
        return {"weight": torch.zeros(2, 3)}


def _save_whose_tensors_cannot_be_gathered_on_rank_1(rank, world, root):
    ckpt.save(root, 1, model=_linear(1.0), rank_state={"rank": rank})
    error = _second_save_error(root, {"rank": rank}, ema=_EmaFailingOnRank1(rank))
    return _outcome(root, error)


def test_an_exception_on_one_rank_before_dcp_writes_fails_the_save_on_every_rank_instead_of_a_hang(tmp_path):
    results = spawn(_save_whose_tensors_cannot_be_gathered_on_rank_1, 2, tmp_path, timeout=TIMEOUT_S)
    error = _assert_failed_together(results, tmp_path)
    assert "RuntimeError: EMA shadow weights are on another device" in error, error


def test_a_save_failing_inside_torch_s_writer_for_another_reason_than_the_disk_does_not_blame_the_disk(tmp_path, monkeypatch):
    """vfm-parallel without safetensors (before it was declared): DCP's writer raised ModuleNotFoundError,
    and the error said "Free space or fix the folder's permissions"."""
    import sys

    ckpt.save(tmp_path, 1, model=_linear(1.0))
    monkeypatch.setitem(sys.modules, "safetensors", None)  # what an environment without it imports
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)
    with pytest.raises(ckpt.CheckpointSaveError) as failed:
        ckpt.save(tmp_path, 2, model=_linear(2.0))
    error = str(failed.value)
    assert "failed (ModuleNotFoundError: import of safetensors.torch halted" in error, error
    assert "Free space" not in error and "Fix its cause (that rank's traceback shows where it was raised)" in error, error
    assert sorted(os.listdir(tmp_path)) == ["step_00000001"]


def test_a_writer_error_whose_message_starts_on_a_new_line_is_named_by_its_first_words(tmp_path):
    """safetensors refuses tensors that share memory (here the EMA given is the model itself) with a
    message that starts with a newline: the error said only "(RuntimeError: )"."""
    model = _linear(2.0)
    with pytest.raises(ckpt.CheckpointSaveError) as failed:
        ckpt.save(tmp_path, 1, model=model, ema=model)
    error = str(failed.value)
    assert "failed (RuntimeError: Some tensors share memory" in error, error
    assert os.listdir(tmp_path) == []
