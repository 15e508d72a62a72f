"""Checkpoints are committed atomically: a saver killed with SIGKILL mid-save leaves the previous
checkpoint loadable; old ones are pruned to ``keep``; half-written folders are never listed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from vfm_parallel import checkpoint as ckpt

# A child that saves checkpoints of a 32 MB model forever; the weights of step k are all k.
CHILD = """
import sys, torch
from torch import nn
from vfm_parallel import checkpoint as ckpt
torch.set_num_threads(1)
model = nn.Linear(2048, 4096)
step = 0
while True:
    step += 1
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(step)
    ckpt.save(sys.argv[1], step, model=model, state={"note": "x"}, keep=2)
    print(step, flush=True)
"""


def _model_of(value: float) -> nn.Module:
    model = nn.Linear(2048, 4096)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def test_a_saver_killed_during_a_save_leaves_the_previous_checkpoint_loadable(tmp_path):
    root = tmp_path / "ckpts"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "1"  # step 1 committed
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".tmp-") for p in root.iterdir()):  # a later save is under way
            assert time.monotonic() < deadline, "no save started"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    leftovers = [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the kill was meant to land during a save"
    committed = ckpt.list_checkpoints(root)
    assert committed and all(not p.name.startswith(".") for p in committed)
    newest = ckpt.latest(root)
    step = int(newest.name.split("_")[1])
    model = _model_of(-1.0)
    state, _ = ckpt.load(newest, model=model)
    assert state["step"] == step
    assert all(torch.equal(p, torch.full_like(p, step)) for p in model.parameters())
    # the next save of the interrupted step replaces the leftover and commits
    interrupted = int(leftovers[0].name.rsplit("_", 1)[1])
    ckpt.save(root, interrupted, model=_model_of(interrupted))
    assert not (root / leftovers[0].name).exists()
    assert ckpt.latest(root).name == f"step_{interrupted:08d}"


def test_keep_prunes_old_checkpoints_and_load_refuses_an_uncommitted_folder(tmp_path):
    model = nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    for step in range(1, 5):
        model(torch.randn(4, 3)).sum().backward()
        optimizer.step()
        ckpt.save(tmp_path, step, model=model, optimizer=optimizer, rank_state={"pos": step}, keep=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step_00000003", "step_00000004"]
    fresh = nn.Linear(3, 2)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.5)
    state, rank_state = ckpt.load(ckpt.latest(tmp_path), model=fresh, optimizer=fresh_opt)
    assert state["step"] == 4 and rank_state == {"pos": 4}
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))
    assert fresh_opt.param_groups[0]["lr"] == 0.1
    assert torch.equal(fresh_opt.state[fresh.weight]["exp_avg"], optimizer.state[model.weight]["exp_avg"])
    (tmp_path / ".tmp-step_00000009").mkdir()
    assert ckpt.latest(tmp_path).name == "step_00000004"
    try:
        ckpt.load(tmp_path / ".tmp-step_00000009", model=fresh)
    except FileNotFoundError as exc:
        assert "not a committed checkpoint" in str(exc)
    else:
        raise AssertionError("an uncommitted folder loaded")


def test_checkpoint_files_are_safetensors_and_json_only(tmp_path):
    path = ckpt.save(tmp_path, 1, model=nn.Linear(3, 2), rank_state={"a": 1})
    suffixes = {p.suffix for p in Path(path).rglob("*") if p.is_file()}
    assert suffixes <= {".safetensors", ".json"}, suffixes
    assert os.path.basename(path) == "step_00000001"


def test_a_link_at_the_temporary_folder_is_refused_naming_it_and_its_target_is_untouched(tmp_path):
    """``.tmp-step_N`` is a name a save makes; a link there is not a save that died (no space or
    permission problem): the error names the link and says to remove it."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    root = tmp_path / "ckpts"
    root.mkdir()
    link = root / f".tmp-{ckpt.step_dir(root, 3).name}"
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ckpt.CheckpointSaveError) as raised:
        ckpt.save(root, 3, model=nn.Linear(2, 2))
    error = str(raised.value)
    assert f"{link} is a symbolic link (to {outside})" in error and f"remove the link {link}" in error.lower()
    assert "Free space" not in error
    assert [p.name for p in outside.iterdir()] == ["keep.txt"] and (outside / "keep.txt").read_text() == "precious"
    link.unlink()
    assert ckpt.save(root, 3, model=nn.Linear(2, 2)) == ckpt.step_dir(root, 3)
