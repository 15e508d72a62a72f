"""Checkpoints are whole or refused: a manifest of every file (size, sha256) is written at commit and
checked on load; tensor names, shapes and dtypes are checked against the model; bad step values,
changed run settings and damaged files are refused with one line naming what differs; ``resume =
"auto"`` falls back from a damaged newest checkpoint to the newest intact one."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

import vfm_models
from tests.gloo import spawn
from tests.parallel.trainer_helpers import SHAPE, run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel import checkpoint as ckpt


def _linear(value: float = 1.0) -> nn.Module:
    model = nn.Linear(3, 2)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def _tensor_files(folder: Path) -> list[Path]:
    return sorted((folder / "tensors").glob("*.safetensors"))


def _reseal(folder: Path) -> None:
    """Rewrite the manifest for the folder's files as they are now, as a tool other than vfm might
    (a linked file hashed through: vfm's own sealing refuses links): a crafted checkpoint whose
    checksums agree, so that the checks behind the checksums are what is tested."""
    from vfm_parallel.checkpoint_integrity import MANIFEST, MANIFEST_FORMAT, hash_file

    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    files = {n: hash_file(folder / n) for n in names if n != MANIFEST}
    manifest = {"format": MANIFEST_FORMAT, "step": int(folder.name.split("_")[1]), "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest))


def _error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(ckpt.CheckpointError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    return message


# --- the manifest and the files ----------------------------------------------------------------------

def test_the_manifest_lists_every_file_with_its_size_and_sha256(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear(), rank_state={"pos": 1})
    manifest = json.loads((path / "manifest.json").read_text())
    files = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(manifest["files"]) == files and {"state.json", "ranks/rank_00000.json"} <= files
    for name, entry in manifest["files"].items():
        data = (path / name).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert manifest["step"] == 1


def test_a_folder_without_a_manifest_is_not_a_committed_checkpoint(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear())
    (path / "manifest.json").unlink()
    message = _error_of(ckpt.load, path, model=_linear())
    assert "not a committed checkpoint" in message and "manifest.json" in message


def test_a_flipped_byte_in_a_tensor_file_is_refused_naming_the_file(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear(2.0))
    target = _tensor_files(path)[0]
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF  # inside the tensor data: the header still parses, the values are wrong
    target.write_bytes(bytes(data))
    message = _error_of(ckpt.load, path, model=_linear())
    assert target.name in message and "sha256" in message


def test_a_deleted_tensor_file_and_a_file_not_in_the_manifest_are_refused(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear())
    extra = path / "tensors" / "extra.safetensors"
    shutil.copy(_tensor_files(path)[0], extra)
    assert "extra.safetensors" in _error_of(ckpt.load, path, model=_linear())
    extra.unlink()
    target = _tensor_files(path)[0]
    target.unlink()
    message = _error_of(ckpt.load, path, model=_linear())
    assert target.name in message and "missing" in message


def test_rank_states_of_a_rank_file_that_is_not_json_is_a_damaged_checkpoint_error_naming_the_file(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear(), rank_state={"pos": 1})
    assert ckpt.rank_states(path) == {0: {"pos": 1}}
    (path / "ranks" / "rank_00000.json").write_text('{"pos": ')
    message = _error_of(ckpt.rank_states, path)
    assert message.startswith(f"checkpoint {path} is damaged: ranks/rank_00000.json is not readable JSON (")
    assert message.endswith("; resume from an earlier checkpoint")


def test_rank_states_of_a_rank_file_that_cannot_be_read_is_a_checkpoint_error_naming_the_file(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear(), rank_state={"pos": 1})
    (path / "ranks" / "rank_00001.json").mkdir()  # an OSError (IsADirectoryError) whoever the test runs as
    message = _error_of(ckpt.rank_states, path)
    assert message.startswith(f"checkpoint {path} is damaged: ranks/rank_00001.json cannot be read (IsADirectoryError: ")
    assert message.endswith("; resume from an earlier checkpoint")


# --- names, shapes and dtypes --------------------------------------------------------------------------

def _dit(depth: int) -> nn.Module:
    return vfm_models.get_family("dit").create("tiny", in_channels=SHAPE[0], patch=(1, 2, 2), num_classes=4,
                                                hidden=16, num_heads=2, depth=depth)


def test_a_deeper_models_checkpoint_is_refused_by_a_shallower_model_naming_the_extra_blocks(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_dit(3))
    message = _error_of(ckpt.load, path, model=_dit(2))
    assert "unexpected" in message and "model.blocks.2." in message
    assert "model.blocks.1." not in message  # the blocks both have are not listed
    # and the other way round: the missing blocks are named
    path = ckpt.save(tmp_path / "shallow", 1, model=_dit(2))
    message = _error_of(ckpt.load, path, model=_dit(3))
    assert "missing" in message and "model.blocks.2." in message


def test_a_tensor_of_another_shape_or_dtype_is_refused_naming_it(tmp_path):
    path = ckpt.save(tmp_path, 1, model=nn.Linear(3, 4))
    message = _error_of(ckpt.load, path, model=nn.Linear(3, 2))
    assert "model.weight" in message and "(4, 3)" in message and "(2, 3)" in message
    path = ckpt.save(tmp_path / "bf16", 1, model=nn.Linear(3, 2).to(torch.bfloat16))
    message = _error_of(ckpt.load, path, model=nn.Linear(3, 2))
    assert "model.weight" in message and "bfloat16" in message and "float32" in message


def test_a_tensor_whose_header_dtype_was_changed_is_refused(tmp_path):
    path = ckpt.save(tmp_path, 1, model=_linear(1.0))
    target = _tensor_files(path)[0]
    data = target.read_bytes()
    edited = data.replace(b'"model.weight":{"dtype":"F32"', b'"model.weight":{"dtype":"I32"', 1)
    assert edited != data
    target.write_bytes(edited)
    assert target.name in _error_of(ckpt.load, path, model=_linear())  # the checksum
    _reseal(path)
    message = _error_of(ckpt.load, path, model=_linear())  # behind the checksum: the dtype
    assert "model.weight" in message and "int32" in message


@pytest.mark.parametrize("step", [-5, "4", 4.5, True, 3, None])
def test_bad_step_values_in_state_json_are_refused(tmp_path, step):
    path = ckpt.save(tmp_path, 4, model=_linear())
    state = json.loads((path / "state.json").read_text())
    state["step"] = step
    (path / "state.json").write_text(json.dumps(state))
    assert "state.json" in _error_of(ckpt.load, path, model=_linear())  # the checksum
    _reseal(path)
    message = _error_of(ckpt.load, path, model=_linear())
    assert "step" in message and repr(step) in message


# --- committing ----------------------------------------------------------------------------------------

def test_a_resave_of_a_step_interrupted_between_the_renames_leaves_that_step_loadable(tmp_path, monkeypatch):
    ckpt.save(tmp_path, 1, model=_linear(1.0))
    ckpt.save(tmp_path, 2, model=_linear(2.0))
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name.startswith(".tmp-"):  # the new folder would go in now: the process dies
            raise KeyboardInterrupt("killed")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(tmp_path, 2, model=_linear(5.0))
    monkeypatch.setattr(os, "rename", real_rename)
    newest = ckpt.latest(tmp_path)
    assert newest is not None and re.fullmatch(r"(\.old-step_00000002-[0-9a-f]{12}|step_00000002)", newest.name)
    model = _linear(0.0)
    state, _ = ckpt.load(newest, model=model)
    assert state["step"] == 2 and all(torch.equal(p, torch.full_like(p, 2.0)) for p in model.parameters())
    ckpt.save(tmp_path, 2, model=_linear(5.0))  # the next re-save completes and leaves one step 2
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step_00000001", "step_00000002"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    ckpt.load(ckpt.latest(tmp_path), model=model)
    assert all(torch.equal(p, torch.full_like(p, 5.0)) for p in model.parameters())


# --- the trainer ----------------------------------------------------------------------------------------

def _split_run(tmp_path, stop_at: int = 3, **sections) -> dict:
    cfg = tiny_config(tmp_path, train={"steps": 6, "stop_at": stop_at}, **sections)
    run_config(cfg)
    cfg["train"]["stop_at"] = 0
    return cfg


def test_resume_says_resuming_from_step_n_and_the_path(tmp_path, capsys):
    cfg = _split_run(tmp_path)
    capsys.readouterr()
    assert run_config(cfg).start_step == 3
    out = capsys.readouterr().out
    assert f"resuming from step 3 ({tmp_path / 'checkpoints' / 'step_00000003'})" in out


@pytest.mark.parametrize("section, name, value, key, change, allow", [
    ("train", "seed", 8, "train.seed", "7 -> 8", "seed"),
    ("data", "micro_batch", 4, "data.micro_batch", "2 -> 4", "batch"),
    ("optim", "grad_accum", 2, "global micro-batches per step", "1 -> 2", "batch"),
    ("data", "num_samples", 32, "data.num_samples", "16 -> 32", "data"),
    ("train", "noise_chunks", 2, "noise chunks", "1 -> 2", "data"),
    ("model", "preset", "small", "model.preset", "'tiny' -> 'small'", "model"),
])
def test_a_changed_setting_is_refused_on_resume_unless_allowed(tmp_path, section, name, value, key, change, allow):
    cfg = _split_run(tmp_path)
    cfg[section][name] = value
    message = _error_of(run_config, cfg)
    assert key in message and change in message and f'"{allow}"' in message
    assert "checkpoint.allow_changes" in message
    # the tiny parts ignore the model section and draw unchunked noise only: those two are not run
    if name not in ("preset", "noise_chunks"):
        cfg["checkpoint"]["allow_changes"] = [allow]
        assert run_config(cfg).start_step == 3


def test_settings_that_do_not_change_the_sample_sequence_may_change(tmp_path):
    cfg = _split_run(tmp_path)
    cfg["optim"]["lr"] = 1e-3
    cfg["checkpoint"]["interval"] = 5
    cfg["logging"]["interval"] = 2
    assert run_config(cfg).start_step == 3


def test_a_missing_rank_file_is_refused_instead_of_restarting_the_loader(tmp_path):
    cfg = _split_run(tmp_path)
    folder = tmp_path / "checkpoints" / "step_00000003"
    (folder / "ranks" / "rank_00000.json").unlink()
    assert "rank_00000.json" in _error_of(run_config, cfg)
    _reseal(folder)  # the manifest agrees: the trainer still needs the loader's position
    message = _error_of(run_config, cfg)
    assert "rank_00000.json" in message and "loader" in message


def test_auto_resume_falls_back_from_a_damaged_newest_checkpoint_to_the_newest_intact_one(tmp_path, capsys):
    straight = run_config(tiny_config(tmp_path / "straight", train={"steps": 6}))
    cfg = _split_run(tmp_path / "split", stop_at=4, checkpoint={"interval": 2, "keep": 3})
    newest = tmp_path / "split" / "checkpoints" / "step_00000004"
    target = _tensor_files(newest)[0]
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    capsys.readouterr()
    resumed = run_config(cfg)
    captured = capsys.readouterr()
    assert resumed.start_step == 2
    assert "step_00000004" in captured.err and target.name in captured.err and "step_00000002" in captured.err
    assert "resuming from step 2" in captured.out
    assert {s: resumed.losses[s] for s in (3, 4, 5, 6)} == {s: straight.losses[s] for s in (3, 4, 5, 6)}
    # the re-saved step 4 replaced the damaged one
    ckpt.verify(newest)


def test_a_damaged_checkpoint_named_explicitly_is_a_one_line_error_naming_the_file(tmp_path):
    cfg = _split_run(tmp_path, stop_at=4, checkpoint={"interval": 2, "keep": 3})
    folder = tmp_path / "checkpoints" / "step_00000004"
    target = folder / "state.json"
    target.write_text(target.read_text().replace('"step": 4', '"step": 5'))
    cfg["checkpoint"]["resume"] = str(folder)
    message = _error_of(run_config, cfg)
    assert str(folder) in message and "state.json" in message


def test_every_checkpoint_damaged_is_an_error_not_a_fresh_start(tmp_path):
    cfg = _split_run(tmp_path)
    (tmp_path / "checkpoints" / "step_00000003" / "state.json").write_text("{")
    message = _error_of(run_config, cfg)
    assert "state.json" in message and 'resume = "none"' in message


# --- two ranks ------------------------------------------------------------------------------------------

def _two_rank_scenarios(rank, world, root):
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    out: dict = {}
    # FSDP over 2 ranks: each rank writes its own tensor file; one of them is deleted
    fsdp = tiny_config(root / "fsdp", train={"steps": 4, "stop_at": 2})
    run_config(fsdp)
    folder = root / "fsdp" / "checkpoints" / "step_00000002"
    out["fsdp_manifest"] = sorted(json.loads((folder / "manifest.json").read_text())["files"])
    dist.barrier()
    if rank == 0:
        shutil.copytree(root / "fsdp", root / "fsdp2")  # an intact copy for the single-process tests
        out["deleted"] = _tensor_files(folder)[-1].name
        _tensor_files(folder)[-1].unlink()
    dist.barrier()
    fsdp["train"]["stop_at"] = 0
    try:
        run_config(fsdp)
        out["fsdp_error"] = None
    except ckpt.CheckpointError as exc:
        out["fsdp_error"] = str(exc)
    # TP 2 (data-parallel degree 1) for the single-process resume below
    run_config(tiny_config(root / "tp", train={"steps": 4, "stop_at": 2}, parallel={"tp": 2, "dp_shard": 1}))
    # pipeline stages each hold their own blocks: the name check takes every stage's together
    pp = tiny_config(root / "pp", train={"steps": 4, "stop_at": 2}, parallel={"pp": 2, "dp_shard": 1})
    run_config(pp)
    pp["train"]["stop_at"] = 0
    out["pp_start"] = run_config(pp).start_step
    return out if rank == 0 else None


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("two")
    return root, spawn(_two_rank_scenarios, 2, root)[0]


def test_a_two_rank_fsdp_checkpoint_missing_one_ranks_tensor_file_is_refused(two_ranks):
    _, out = two_ranks
    assert len([f for f in out["fsdp_manifest"] if f.startswith("tensors/")]) == 2  # both ranks' files
    assert out["fsdp_error"] is not None, "resumed with half the weights"
    assert out["deleted"] in out["fsdp_error"] and "missing" in out["fsdp_error"]


def test_a_pipeline_parallel_run_resumes_with_every_stage_checked_against_the_whole_checkpoint(two_ranks):
    _, out = two_ranks
    assert out["pp_start"] == 2


def test_a_layout_change_keeping_the_data_parallel_degree_resumes(two_ranks):
    root, _ = two_ranks
    cfg = tiny_config(root / "tp", train={"steps": 4})  # one process: dp 1 as under tp 2
    assert run_config(cfg).start_step == 2


def test_a_data_parallel_degree_change_is_refused_unless_the_layout_change_is_allowed(two_ranks):
    root, _ = two_ranks
    cfg = tiny_config(root / "fsdp2", train={"steps": 4}, optim={"grad_accum": 2})  # same global batch
    message = _error_of(run_config, cfg)
    assert '"layout"' in message and "data-parallel" in message
    cfg["checkpoint"]["allow_changes"] = ["layout"]
    assert run_config(cfg).start_step == 2


def test_write_manifest_replaces_a_link_at_manifest_json_and_leaves_its_target_alone(tmp_path):
    from vfm_parallel.checkpoint_integrity import MANIFEST, write_manifest

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "step"
    folder.mkdir()
    (folder / "state.json").write_text('{"step": 1}')
    (folder / MANIFEST).symlink_to(victim)
    write_manifest(folder, 1)
    assert victim.read_text() == "precious" and not (folder / MANIFEST).is_symlink()
    assert list(json.loads((folder / MANIFEST).read_text())["files"]) == ["state.json"]


def test_an_error_message_starting_on_a_new_line_is_named_by_its_first_words_wherever_a_checkpoint_error_quotes_it():
    # safetensors' errors start with a newline: a header that does not read was quoted as '(SafetensorError: )'
    from vfm_parallel.checkpoint_integrity import first_line

    assert first_line(RuntimeError("\n  Some tensors share memory, this will lead to duplicate memory\nmore")) == (
        "Some tensors share memory, this will lead to duplicate memory")
    assert first_line(RuntimeError("one line")) == "one line" and first_line(RuntimeError()) == ""
