"""Checkpoints are committed atomically: a saver killed with SIGKILL mid-save leaves the previous
checkpoint loadable; old ones are pruned to ``keep``; half-written folders are never listed."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from torch import nn

from vfm_parallel import checkpoint as ckpt
from vfm_parallel import checkpoint_folders

# A child that saves checkpoints of nn.Linear({shape}) into argv[1] forever: the weights of its k-th save are all k,
# which it prints once that save is committed.
_SAVER = """
import sys, torch
from torch import nn
from vfm_parallel import checkpoint as ckpt
torch.set_num_threads(1)
model = nn.Linear({shape})
value = 0
while True:
    value += 1
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    ckpt.save(sys.argv[1], {step}, model=model, {options})
    print(value, flush=True)
"""
# a 32 MB model, the k-th save as step k
CHILD = _SAVER.format(shape="2048, 4096", step="value", options='state={"note": "x"}, keep=2')
# step 1 saved again and again, its value in state.json
RESAVER = _SAVER.format(shape="256, 256", step="1", options='state={"value": value}')


@contextmanager
def _saver_killed_at_exit(script: str, root: Path) -> Iterator[subprocess.Popen]:
    """The child running ``script`` on ``root``, killed with SIGKILL when the block ends (and whatever
    happened in it)."""
    child = subprocess.Popen([sys.executable, "-c", script, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        yield child
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()


def _saved_with_writers_fsyncs(rank, world, root):
    """(every file of a two-rank save fsynced by this process through a descriptor open for writing, i.e.
    by its writer: relative to the save's folder, a temporary JSON file under its final name; the names
    in the committed checkpoint)."""
    import fcntl

    from torch.distributed.fsdp import fully_shard

    real_fsync, synced = os.fsync, set()

    def recording_fsync(fd):
        fd = fd if isinstance(fd, int) else fd.fileno()
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:  # the manifest's hashing reads
            synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    model = nn.Linear(4, 6)
    fully_shard(model)
    os.fsync = recording_fsync
    try:
        final = ckpt.save(root, 3, model=model, rank_state={"rank": rank})
    finally:
        os.fsync = real_fsync
    in_folder = (Path(*Path(p).relative_to(root.resolve()).parts[1:]).as_posix() for p in synced)  # below .tmp-step_*
    names = {re.sub(r"^(.*/)?\.(.+)\.\w+\.tmp$", r"\1\2", name) for name in in_folder}
    return sorted(names), sorted(p.relative_to(final).as_posix() for p in final.rglob("*") if p.is_file())


def test_every_file_of_a_two_rank_save_is_fsynced_by_the_rank_that_wrote_it(tmp_path):
    """The manifest's hashing fsyncs each file again, split over the ranks: rank 0 hashes rank 1's tensor
    file. On one machine that flushes it too (fsync is per inode), but on a filesystem shared by nodes it
    is the writer's client that holds the unwritten pages, so the writer's own fsync is what makes a
    committed checkpoint durable: DCP's (FileSystemWriter's sync_files, which save sets) and replace_file's."""
    from tests.gloo import spawn

    (rank0, files), (rank1, _) = spawn(_saved_with_writers_fsyncs, 2, tmp_path)
    assert rank0 == ["manifest.json", "ranks/rank_00000.json", "state.json",
                     "tensors/shard-00001-model-00001-of-00001.safetensors"]
    assert rank1 == ["ranks/rank_00001.json", "tensors/shard-00002-model-00001-of-00001.safetensors"]
    assert sorted(rank0 + rank1) == files


def _filled(value: float, in_features: int = 4, out_features: int = 3) -> nn.Module:
    model = nn.Linear(in_features, out_features)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def test_a_saver_killed_during_a_save_leaves_the_previous_checkpoint_loadable(tmp_path):
    root = tmp_path / "ckpts"
    with _saver_killed_at_exit(CHILD, root) as child:
        assert child.stdout.readline().strip() == "1"  # step 1 committed
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".tmp-") for p in root.iterdir()):  # a later save is under way
            assert time.monotonic() < deadline, "no save started"
    leftovers = [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the kill was meant to land during a save"
    committed = ckpt.list_checkpoints(root)
    assert committed and all(not p.name.startswith(".") for p in committed)
    newest = ckpt.latest(root)
    step = int(newest.name.split("_")[1])
    model = _filled(-1.0, 2048, 4096)
    state, _ = ckpt.load(newest, model=model)
    assert state["step"] == step
    assert all(torch.equal(p, torch.full_like(p, step)) for p in model.parameters())
    # the next save of the interrupted step replaces the leftover and commits
    interrupted = int(re.fullmatch(r"\.tmp-step_(\d{8})-.+", leftovers[0].name).group(1))
    ckpt.save(root, interrupted, model=_filled(interrupted, 2048, 4096))
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


def test_a_link_planted_at_the_old_predictable_temporary_name_no_longer_stops_the_save(tmp_path):
    """``.tmp-step_N`` was the one name a save wrote under: a link (or any file) planted there by anyone
    who can write the checkpoint folder failed every save of that step. The name is random now; what
    sits at the old name, or at a name of the new form, is neither followed nor removed."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    root = tmp_path / "ckpts"
    root.mkdir()
    planted = [root / ".tmp-step_00000003", root / ".tmp-step_00000003-aaaaaaaa"]
    for link in planted:
        link.symlink_to(outside, target_is_directory=True)
    (root / ".tmp-step_00000003-bbbbbbbb").write_text("a file")
    assert ckpt.save(root, 3, model=nn.Linear(2, 2)) == ckpt.step_dir(root, 3)
    assert ckpt.verify(ckpt.step_dir(root, 3))["step"] == 3
    assert all(link.is_symlink() for link in planted) and (root / ".tmp-step_00000003-bbbbbbbb").read_text() == "a file"
    assert [p.name for p in outside.iterdir()] == ["keep.txt"] and (outside / "keep.txt").read_text() == "precious"


def test_each_save_writes_under_a_new_random_name_and_removes_the_folders_dead_saves_of_its_step_left(tmp_path, monkeypatch):
    root = tmp_path / "ckpts"
    root.mkdir()
    for name in (".tmp-step_00000003", ".tmp-step_00000003-k2x9q7ab", ".tmp-step_00000004-k2x9q7ab"):
        (root / name / "tensors").mkdir(parents=True)  # what killed saves left (the first: earlier versions)
        (root / name / "tensors" / "half.safetensors").write_bytes(b"half")
    seen = []
    real_mkdtemp = checkpoint_folders.tempfile.mkdtemp

    def recording_mkdtemp(**kwargs):  # the names are gone once committed: noted as they are made
        made = real_mkdtemp(**kwargs)
        seen.append(Path(made).name)
        return made

    monkeypatch.setattr(checkpoint_folders.tempfile, "mkdtemp", recording_mkdtemp)
    ckpt.save(root, 3, model=nn.Linear(2, 2))
    ckpt.save(root, 3, model=nn.Linear(2, 2))  # a re-save: another name again
    monkeypatch.undo()
    assert len(set(seen)) == 2 and all(re.fullmatch(r"\.tmp-step_00000003-[a-z0-9_]{8}", n) for n in seen)
    # the same step's leftovers are gone; another step's waits for a save of that step
    assert sorted(p.name for p in root.iterdir()) == [".tmp-step_00000004-k2x9q7ab", "step_00000003"]
    old = os.umask(0o027)
    try:
        ckpt.save(root, 4, model=nn.Linear(2, 2))
    finally:
        os.umask(old)
    assert sorted(p.name for p in root.iterdir()) == ["step_00000003", "step_00000004"]
    # private while written, the umask's permissions once committed
    assert stat.S_IMODE(ckpt.step_dir(root, 4).stat().st_mode) == 0o750


def _save_over_two_ranks(rank, world, root):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    if rank == 0:  # planted at the old name, and a killed two-rank save's leftover of the same step
        (root / "elsewhere").mkdir(parents=True)
        (root / "ckpts").mkdir()
        (root / "ckpts" / ".tmp-step_00000003").symlink_to(root / "elsewhere", target_is_directory=True)
        (root / "ckpts" / ".tmp-step_00000003-deadrun0" / "ranks").mkdir(parents=True)
    dist.barrier()
    torch.manual_seed(0)
    model = nn.Linear(4, 6)
    want = {k: v.clone() for k, v in model.state_dict().items()}
    fully_shard(model)  # each rank writes its own rows into the folder rank 0 named
    ckpt.save(root / "ckpts", 3, model=model, rank_state={"rank": rank})
    fresh = nn.Linear(4, 6)
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()
    fully_shard(fresh)
    state, rank_state = ckpt.load(ckpt.latest(root / "ckpts"), model=fresh)
    got = {k: v.full_tensor() for k, v in fresh.state_dict().items()}
    return {"equal": all(torch.equal(got[k], want[k]) for k in want), "step": state["step"], "rank_state": rank_state,
            "names": sorted(p.name for p in (root / "ckpts").iterdir()),
            "files": sorted(json.loads((ckpt.latest(root / "ckpts") / "manifest.json").read_text())["files"])}


def test_a_two_rank_save_under_the_random_name_resumes_equal_past_a_planted_link_and_a_leftover(tmp_path):
    from tests.gloo import spawn

    results = spawn(_save_over_two_ranks, 2, tmp_path)
    for rank, out in enumerate(results):
        assert out["equal"] and out["step"] == 3 and out["rank_state"] == {"rank": rank}
        assert out["names"] == [".tmp-step_00000003", "step_00000003"]  # the link stays, the leftover is gone
    assert [f for f in results[0]["files"] if f.startswith(("tensors/", "ranks/"))] == [
        "ranks/rank_00000.json", "ranks/rank_00001.json",
        "tensors/shard-00001-model-00001-of-00001.safetensors", "tensors/shard-00002-model-00001-of-00001.safetensors"]
    assert not list((tmp_path / "elsewhere").iterdir())


def test_something_planted_at_an_aside_name_neither_stops_a_re_save_nor_is_followed_or_removed(tmp_path):
    """A re-save of a committed step renames the old folder aside first. That name was
    ``.old-step_N``, the same every time: a file or link planted there failed every re-save of the
    step. The aside name is random now; what sits at names of either form is left alone."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    root = tmp_path / "ckpts"
    ckpt.save(root, 3, model=_filled(1.0))
    (root / ".old-step_00000003").write_text("a file")
    (root / ".old-step_00000003-aaaaaaaaaaaa").symlink_to(outside, target_is_directory=True)
    assert ckpt.save(root, 3, model=_filled(2.0), state={"again": True}) == ckpt.step_dir(root, 3)
    state, _ = ckpt.load(ckpt.step_dir(root, 3), model=_filled(0.0))
    assert state["again"] is True
    assert sorted(p.name for p in root.iterdir()) == [".old-step_00000003", ".old-step_00000003-aaaaaaaaaaaa",
                                                      "step_00000003"]
    assert (root / ".old-step_00000003").read_text() == "a file"
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


def test_list_checkpoints_lists_no_link_at_a_checkpoint_name(tmp_path):
    """A link named like a checkpoint (``step_N`` or an aside copy) to a folder elsewhere, even a whole
    checkpoint, is not listed: ``resume = "auto"`` must not load from outside the checkpoint folder,
    nor ``keep`` prune there."""
    elsewhere = ckpt.save(tmp_path / "elsewhere", 9, model=_filled(9.0))
    root = tmp_path / "ckpts"
    ckpt.save(root, 3, model=_filled(3.0))
    (root / "step_00000009").symlink_to(elsewhere, target_is_directory=True)
    (root / ".old-step_00000008-aaaaaaaaaaaa").symlink_to(elsewhere, target_is_directory=True)
    (root / ".old-step_00000007").symlink_to(elsewhere, target_is_directory=True)
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["step_00000003"]
    ckpt.save(root, 4, model=_filled(4.0), keep=1)
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["step_00000004"]
    assert ckpt.verify(elsewhere)["step"] == 9  # not pruned through the links


def _resave_killed_between_its_renames(root: Path) -> Path:
    """What a re-save of step 3 killed after renaming the old folder aside, before renaming its own
    folder in, leaves: the old copy under a random ``.old-`` name and the new one under ``.tmp-``."""
    ckpt.save(root, 2, model=_filled(2.0))
    ckpt.save(root, 3, model=_filled(3.0))
    aside = root / ".old-step_00000003-3f9c2a7b1d04"
    os.rename(ckpt.step_dir(root, 3), aside)
    (root / ".tmp-step_00000003-x7k2m9qa" / "tensors").mkdir(parents=True)
    return aside


def test_a_re_save_killed_between_its_renames_leaves_the_step_loadable_from_its_aside_copy(tmp_path):
    root = tmp_path / "ckpts"
    aside = _resave_killed_between_its_renames(root)
    assert ckpt.list_checkpoints(root) == [ckpt.step_dir(root, 2), aside]
    model = _filled(0.0)
    state, _ = ckpt.load(ckpt.latest(root), model=model)  # its step checked against the aside's name
    assert state["step"] == 3 and all(torch.equal(p, torch.full_like(p, 3.0)) for p in model.parameters())
    # the next save of the step commits and removes the copy and the leftover
    ckpt.save(root, 3, model=_filled(4.0))
    assert sorted(p.name for p in root.iterdir()) == ["step_00000002", "step_00000003"]


def test_an_aside_copy_whose_removal_began_is_not_listed_and_pruning_a_step_removes_its_copies(tmp_path):
    root = tmp_path / "ckpts"
    aside = _resave_killed_between_its_renames(root)
    (aside / "manifest.json").unlink()  # removal starts with the manifest: what is left is no checkpoint
    assert ckpt.list_checkpoints(root) == [ckpt.step_dir(root, 2)]
    os.rename(root / "step_00000002", root / ".old-step_00000002-aaaaaaaaaaaa")  # a whole copy, listed
    ckpt.save(root, 2, model=_filled(2.0))  # step 2 again, beside a stale copy of step 2
    stale = root / ".old-step_00000002-bbbbbbbbbbbb"
    ckpt.save(tmp_path / "copy", 2, model=_filled(5.0)).rename(stale)
    assert ckpt.list_checkpoints(root) == [ckpt.step_dir(root, 2)]  # step_N stands: copies are not listed
    ckpt.save(root, 5, model=_filled(5.0), keep=1)
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["step_00000005"]
    assert not stale.exists()  # pruned with its step, not listed as step 2 once step_00000002 went


def test_a_process_killed_at_any_moment_while_re_saving_a_step_leaves_that_step_loadable(tmp_path):
    root = tmp_path / "ckpts"
    for delay in (0.0, 0.02, 0.05, 0.1):  # spread over a save's phases
        with _saver_killed_at_exit(RESAVER, root) as child:
            assert child.stdout.readline().strip()  # one save committed: each later one is a re-save
            time.sleep(delay)
        found = ckpt.list_checkpoints(root)
        assert len(found) == 1, found
        model = nn.Linear(256, 256)
        state, _ = ckpt.load(found[0], model=model)
        assert state["step"] == 1
        assert all(torch.equal(p, torch.full_like(p, state["value"])) for p in model.parameters())


def test_a_step_its_folder_name_cannot_hold_is_refused_before_anything_is_written(tmp_path):
    """``step_<N>`` holds N in 8 digits: a step of -1 or 10**8 was written whole, then failed at the
    commit with an AttributeError (its folder name matched no checkpoint name)."""
    root = tmp_path / "ckpts"
    for step in (-1, 10**8, True, 2.0):
        try:
            ckpt.save(root, step, model=_filled(1.0))
        except ValueError as exc:
            error = str(exc)
        else:
            raise AssertionError(f"step {step!r} was saved")
        assert f"checkpoint step {step!r}" in error and "a whole number from 0 to 99999999" in error, error
    assert not root.exists() or list(root.iterdir()) == []
