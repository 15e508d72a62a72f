"""A checkpoint's format version lives in its manifest (written last, read first). A checkpoint from a
newer vfm is refused in one line naming the file, its version and the upgrade, as an incompatible
checkpoint, not a damaged one: ``resume = "auto"`` stops there instead of passing over it to an older
checkpoint and saving over the newer one."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from tests.format_versions import assert_one_line_naming
from tests.parallel.trainer_helpers import run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel import checkpoint as ckpt
from vfm_parallel.checkpoint_integrity import MANIFEST, MANIFEST_FORMAT, CheckpointFormatError
from vfm_plugins.formats import FormatVersionError


def _edit_manifest(folder, change) -> None:
    manifest = json.loads((folder / MANIFEST).read_text())
    change(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def _bump(folder, **extra) -> None:
    """The manifest as a newer vfm writes it: a higher format (the files it lists unchanged)."""
    _edit_manifest(folder, lambda m: m.update(format=MANIFEST_FORMAT + 1, **extra))


def test_a_checkpoint_names_its_format_and_writer_in_its_manifest(tmp_path):
    path = ckpt.save(tmp_path, 1, model=nn.Linear(2, 2))
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["format"] == MANIFEST_FORMAT and manifest["written_by"].startswith("vfm-parallel ")


def test_a_checkpoint_without_written_by_still_loads(tmp_path):
    path = ckpt.save(tmp_path, 1, model=nn.Linear(2, 2))
    _edit_manifest(path, lambda m: m.pop("written_by"))
    state, _ = ckpt.load(path, model=nn.Linear(2, 2))
    assert state["step"] == 1


def test_a_checkpoint_of_a_newer_format_is_refused_as_incompatible_naming_the_file_version_and_upgrade(tmp_path):
    path = ckpt.save(tmp_path, 1, model=nn.Linear(2, 2))
    _bump(path, written_by="vfm-parallel 9.0.0")
    with pytest.raises(CheckpointFormatError) as info:
        ckpt.load(path, model=nn.Linear(2, 2))
    assert isinstance(info.value, ckpt.IncompatibleCheckpointError) and isinstance(info.value, FormatVersionError)
    assert not isinstance(info.value, ckpt.DamagedCheckpointError)
    message = str(info.value)
    assert_one_line_naming(message, str(path / MANIFEST), f"format version {MANIFEST_FORMAT + 1}", "vfm-parallel 9.0.0",
                           "newer vfm", f"reads version {MANIFEST_FORMAT}", "pip install -U vfm-parallel")


def test_auto_resume_stops_at_a_newer_format_checkpoint_instead_of_saving_over_it(tmp_path):
    cfg = tiny_config(tmp_path, train={"steps": 6, "stop_at": 4}, checkpoint={"interval": 2, "keep": 3})
    run_config(cfg)
    cfg["train"]["stop_at"] = 0
    newest = tmp_path / "checkpoints" / "step_00000004"
    _bump(newest)
    before = (newest / MANIFEST).read_bytes()
    with pytest.raises(CheckpointFormatError, match="step_00000004"):
        run_config(cfg)
    assert (newest / MANIFEST).read_bytes() == before  # still the newer vfm's checkpoint


def test_a_state_json_without_its_optimizer_entry_is_a_damaged_checkpoint_not_a_key_error(tmp_path):
    from vfm_parallel.checkpoint_integrity import hash_file

    model = nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    path = ckpt.save(tmp_path, 1, model=model, optimizer=optimizer)
    state = json.loads((path / "state.json").read_text())
    del state["optimizer"]
    (path / "state.json").write_text(json.dumps(state))
    # resealed: the checksum is not what refuses it
    _edit_manifest(path, lambda m: m["files"].update({"state.json": hash_file(path / "state.json")}))
    fresh = nn.Linear(2, 2)
    with pytest.raises(ckpt.DamagedCheckpointError, match="state.json has no 'optimizer'"):
        ckpt.load(path, model=fresh, optimizer=torch.optim.AdamW(fresh.parameters()))


@pytest.mark.parametrize("format_", [0, -1])
def test_a_manifest_format_below_1_is_a_damaged_checkpoint_not_a_newer_one(tmp_path, format_):
    # no vfm wrote it: resume = "auto" passes over a damaged checkpoint, it stops only at a newer vfm's
    path = ckpt.save(tmp_path, 1, model=nn.Linear(2, 2))
    _edit_manifest(path, lambda m: m.update(format=format_))
    with pytest.raises(ckpt.DamagedCheckpointError):
        ckpt.load(path, model=nn.Linear(2, 2))
