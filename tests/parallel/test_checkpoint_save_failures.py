"""A checkpoint save that fails on one rank, in any phase and with any exception, fails on every rank
together with one ``CheckpointSaveError`` naming the step, the rank and what failed: no rank is left
waiting in the next collective, and none goes on believing the save done. The save's temporary folder
is removed and the checkpoint before it stays the newest, loadable."""

from __future__ import annotations

import errno
import os

import torch
from torch import nn

from tests.gloo import spawn
from vfm_parallel import checkpoint as ckpt
from vfm_parallel import checkpoint_integrity

#: a hang is a failure of the test, not a stuck test run (a two-rank save here takes seconds)
TIMEOUT_S = 90


def _linear(value: float) -> nn.Module:
    model = nn.Linear(3, 2)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


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
        ckpt.save(root, 2, model=_linear(2.0), rank_state=rank_state)
        error = None
    except ckpt.CheckpointSaveError as exc:
        error = str(exc)
    finally:
        checkpoint_integrity.hash_file = real_hash_file  # readable again: the load below hashes it too
    model = _linear(0.0)
    state, _ = ckpt.load(ckpt.latest(root), model=model)
    return {"error": error, "names": sorted(os.listdir(root)), "step": state["step"],
            "weights": all(torch.equal(p, torch.ones_like(p)) for p in model.parameters())}


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
