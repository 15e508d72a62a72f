"""What ``checkpoint.load`` and ``load_weights`` say when the path given is not a checkpoint: the README's
``load(latest(root))`` on a first run (``latest`` is None), the checkpoints' root instead of one of its
``step_<N>`` folders, and a folder that does not exist. Each is a ``NotCommittedError`` (a
``FileNotFoundError``) that says what was given and what to pass."""

from __future__ import annotations

import pytest

from tests.parallel.test_checkpoint_integrity import _linear
from vfm_parallel import checkpoint as ckpt


@pytest.mark.parametrize("read", ["load", "load_weights", "verify"])
def test_no_checkpoint_from_latest_is_refused_saying_latest_found_none(tmp_path, read):
    with pytest.raises(ckpt.NotCommittedError, match=r"no checkpoint given \(None\): checkpoint.latest\(root\) is None "
                       r"when root holds no committed checkpoint"):
        _read(read, ckpt.latest(tmp_path / "checkpoints"))


@pytest.mark.parametrize("read", ["load", "load_weights", "verify"])
def test_the_checkpoints_root_is_refused_naming_its_newest_checkpoint(tmp_path, read):
    ckpt.save(tmp_path, 1, model=_linear(1.0))
    ckpt.save(tmp_path, 2, model=_linear(2.0))
    with pytest.raises(ckpt.NotCommittedError, match=rf"{tmp_path} is a folder of checkpoints \(step_00000001, step_00000002\), "
                       rf"not one: pass one of them, e.g. checkpoint.latest\({tmp_path}\) = {tmp_path}/step_00000002"):
        _read(read, tmp_path)


def test_load_weights_of_a_missing_folder_says_it_is_missing_not_damaged(tmp_path):
    with pytest.raises(ckpt.NotCommittedError, match=r"step_00000001 is not a committed checkpoint \(no such folder\)"):
        ckpt.load_weights(tmp_path / "step_00000001", _linear())


@pytest.mark.parametrize("read", ["load", "load_weights", "verify"])
def test_a_training_runs_folder_is_refused_naming_the_checkpoints_inside_it(tmp_path, read):
    run = tmp_path / "run"  # vfm train's out_dir: checkpoints/step_<N> beside export/, logs...
    ckpt.save(run / "checkpoints", 3, model=_linear(1.0))
    with pytest.raises(ckpt.NotCommittedError, match=rf"{run} is a training run's folder, not a checkpoint: its checkpoints "
                       rf"are {run}/checkpoints/\{{step_00000003\}}; pass one of them, e.g. "
                       rf"checkpoint.latest\({run}/checkpoints\) = {run}/checkpoints/step_00000003"):
        _read(read, run)


@pytest.mark.parametrize("read", ["load", "load_weights", "verify"])
def test_a_folder_holding_no_checkpoint_is_refused_saying_what_to_pass_not_that_a_save_did_not_finish(tmp_path, read):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.pt").write_bytes(b"not ours")
    with pytest.raises(ckpt.NotCommittedError, match=r"weights holds no checkpoint \(no manifest.json, no step_<N> folders\): "
                       r"pass a step_<N> folder that checkpoint.save wrote"):
        _read(read, tmp_path / "weights")


def test_a_step_folder_without_its_manifest_is_a_save_that_did_not_finish(tmp_path):
    ckpt.save(tmp_path, 1, model=_linear(1.0))
    (tmp_path / "step_00000001" / "manifest.json").unlink()
    with pytest.raises(ckpt.NotCommittedError, match=r"step_00000001 is not a committed checkpoint \(no manifest.json: "
                       r"the save did not finish\)"):
        ckpt.load(tmp_path / "step_00000001", model=_linear())


def _read(read, path):
    if read == "load":
        return ckpt.load(path, model=_linear())
    if read == "load_weights":
        return ckpt.load_weights(path, _linear())
    return ckpt.verify(path)


def test_the_checkpoint_the_root_s_refusal_names_is_the_one_latest_returns(tmp_path):
    """The refusal of a root names ``checkpoint.latest(root)``: a ``step_<N>`` that is a link (which
    checkpoints never list), or the aside copy a killed re-save left, is what latest would not, or
    would, return; the message had its own listing and named the link as the newest."""
    root, elsewhere = tmp_path / "checkpoints", tmp_path / "elsewhere"
    ckpt.save(root, 1, model=_linear(1.0))
    linked = ckpt.save(elsewhere, 2, model=_linear(2.0))
    (root / linked.name).symlink_to(linked, target_is_directory=True)
    assert ckpt.latest(root) == root / "step_00000001"
    with pytest.raises(ckpt.NotCommittedError, match=rf"\(step_00000001\), not one: pass one of them, e.g. "
                       rf"checkpoint.latest\({root}\) = {root}/step_00000001$"):
        ckpt.load(root, model=_linear())
