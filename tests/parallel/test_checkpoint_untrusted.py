"""A checkpoint folder from someone else (copied between clusters, downloaded) is read as data and
never reaches outside itself: a symbolic link in it (to a file elsewhere whose checksum the crafted
manifest knows) is refused naming it, as vfm writes none; manifest names with ``..`` or absolute
paths read nothing outside."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from tests.parallel.test_checkpoint_integrity import _error_of, _linear, _reseal, _tensor_files
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel import checkpoint as ckpt


@pytest.fixture
def saved(tmp_path):
    return ckpt.save(tmp_path / "run", 1, model=_linear(2.0), rank_state={"pos": 1})


def test_a_tensor_file_linking_outside_the_checkpoint_is_refused(saved, tmp_path):
    # the link's target has the same bytes, so sizes and checksums agree: only the link gives it away
    tensors = _tensor_files(saved)[0]
    outside = tmp_path / "elsewhere" / tensors.name
    outside.parent.mkdir()
    shutil.copy(tensors, outside)
    tensors.unlink()
    tensors.symlink_to(outside)
    _reseal(saved)
    message = _error_of(ckpt.load, saved, model=_linear(0.0))
    assert f"checkpoint {saved} is damaged: tensors/{tensors.name} is a symbolic link to {outside}" in message
    assert "vfm writes none" in message


def test_a_linked_folder_inside_the_checkpoint_is_refused(saved, tmp_path):
    ranks = saved / "ranks"
    outside = shutil.copytree(ranks, tmp_path / "ranks-elsewhere")
    shutil.rmtree(ranks)
    ranks.symlink_to(outside, target_is_directory=True)
    _reseal(saved)
    message = _error_of(ckpt.verify, saved)
    assert f"ranks is a symbolic link to {outside}" in message


def test_manifest_names_outside_the_folder_read_nothing_there(saved, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["files"][f"../../{secret.name}"] = {"size": 1, "sha256": "0" * 64}
    manifest["files"][str(secret)] = {"size": 1, "sha256": "0" * 64}
    (saved / "manifest.json").write_text(json.dumps(manifest))
    message = _error_of(ckpt.verify, saved)
    assert "is missing" in message and "(and 1 more)" in message
    model = _linear(0.0)
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load(saved, model=model)
    assert torch.equal(model.weight, torch.zeros(2, 3))  # refused whole: nothing was loaded
