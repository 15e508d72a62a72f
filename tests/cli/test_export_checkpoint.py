"""``vfm export RUN/checkpoints/step_<N>`` and ``vfm generate --checkpoint RUN/checkpoints/step_<N>``: a
checkpoint of any layout (one process, 2-rank FSDP, tp=2, pp=2) gives the export the trainer itself writes at
that step (its EMA weights, else the model's), gathered in one process with no process group; a damaged
checkpoint is refused with one line."""

from __future__ import annotations

import json
import os
import tomllib
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from tests.gloo import spawn
from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"
STEPS = 2
#: the tiny config cut to a few seconds of CPU: STEPS steps, one checkpoint at the last (the export's step)
QUICK = {"train": {"steps": STEPS}, "checkpoint": {"interval": STEPS, "export": True},
         "optim": {"warmup_steps": 0}, "data": {"num_samples": 32, "micro_batch": 4},
         "logging": {"tensorboard": False, "loss_curve": False, "progress": False}}


def _sets(sections: dict) -> list[str]:
    items = [f"{name}.{key}={json.dumps(value)}" for name, values in sections.items() for key, value in values.items()]
    return [arg for item in items for arg in ("--set", item)]


def _cli_train(out: Path, **sections) -> Path:
    """The real ``vfm train configs/tiny.toml`` in this process; returns the run folder."""
    extra = {**QUICK, **sections, "train": {**QUICK["train"], **sections.get("train", {}), "out_dir": str(out)}}
    result = CliRunner().invoke(app, ["train", str(TINY), *_sets(extra)])
    assert result.exit_code == 0, result.output
    return out


def _step_dir(run: Path) -> Path:
    return run / "checkpoints" / f"step_{STEPS:08d}"


def _export(src: Path, out: Path, fmt: str = "vfm"):
    return CliRunner().invoke(app, ["export", str(src), "--format", fmt, "-o", str(out)])


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def _assert_same_export(made: Path, trainer: Path) -> None:
    """Tensor-equal weights, and the trainer's config.json plus the source of the weights."""
    ours, theirs = _weights(made), _weights(trainer)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert torch.equal(ours[name], theirs[name]), name
    ours_meta, theirs_meta = (json.loads((f / "config.json").read_text()) for f in (made, trainer))
    assert {k: v for k, v in ours_meta.items() if k != "source"} == theirs_meta


@pytest.fixture(scope="module")
def one_process_run(tmp_path_factory) -> Path:
    return _cli_train(tmp_path_factory.mktemp("one") / "run")


def test_the_export_of_a_one_process_checkpoint_equals_the_trainers_export_at_that_step(one_process_run, tmp_path):
    result = _export(_step_dir(one_process_run), tmp_path / "exp")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"vfm: {tmp_path / 'exp'} (step {STEPS} of {_step_dir(one_process_run)}: EMA weights)"
    _assert_same_export(tmp_path / "exp", one_process_run / "export")
    assert json.loads((tmp_path / "exp" / "config.json").read_text())["source"] == {"step": STEPS, "ema": True}


def test_the_export_of_a_checkpoint_of_a_run_without_ema_holds_its_model_weights_and_says_so(tmp_path):
    run = _cli_train(tmp_path / "run", ema={"enabled": False})
    result = _export(_step_dir(run), tmp_path / "exp")
    assert result.exit_code == 0, result.output
    assert "model weights (the run had no EMA)" in result.output
    _assert_same_export(tmp_path / "exp", run / "export")
    assert json.loads((tmp_path / "exp" / "config.json").read_text())["source"] == {"step": STEPS, "ema": False}


def test_a_checkpoint_exports_to_a_diffusers_folder_as_its_export_does(tmp_path):
    # what diffusers' DiTTransformer2DModel holds: images, a 2-D sin-cos table, its timestep frequencies
    run = _cli_train(tmp_path / "run", data={**QUICK["data"], "latent_shape": [3, 1, 8, 8]},
                     model={"options.pos_embed": "sincos2d", "options.timestep_freq_shift": 1})
    from_checkpoint = _export(_step_dir(run), tmp_path / "a", "diffusers")
    from_export = _export(run / "export", tmp_path / "b", "diffusers")
    assert from_checkpoint.exit_code == 0 and from_export.exit_code == 0, from_checkpoint.output + from_export.output
    for file in sorted(p.name for p in (tmp_path / "b").iterdir()):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes(), file


# --- checkpoints of several processes, gathered in this one ---------------------------------------------------

def _config_dict(out: Path, **parallel) -> dict:
    cfg = tomllib.loads(TINY.read_text())
    for name, values in QUICK.items():
        cfg[name].update(values)
    cfg["train"]["out_dir"] = str(out)
    cfg["parallel"].update(parallel)
    return cfg


def _train_rank(rank, world, cfg):
    """One rank of the real trainer with the CLI's parts (as ``vfm train`` under torchrun builds them)."""
    from vfm_cli import recipe
    from vfm_parallel.trainer import from_dict, train

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    parsed = from_dict(cfg, world)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        train(parsed, recipe.parts_builder(recipe.validate(parsed)))
    return None


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fsdp") / "run"
    spawn(_train_rank, 2, _config_dict(out, dp_shard=2))
    return out


def test_the_export_of_a_2_rank_fsdp_checkpoint_equals_the_trainers_gathered_export(fsdp_run, tmp_path):
    assert len(list((_step_dir(fsdp_run) / "tensors").glob("*.safetensors"))) == 2  # each rank wrote its shards
    assert not torch.distributed.is_initialized()
    result = _export(_step_dir(fsdp_run), tmp_path / "exp")
    assert result.exit_code == 0, result.output
    _assert_same_export(tmp_path / "exp", fsdp_run / "export")


def test_the_export_of_a_2_rank_fsdp_checkpoint_equals_the_one_process_run_of_the_same_steps(fsdp_run, tmp_path):
    # one process with grad_accum 2 draws the same micro-batches per step as 2 FSDP ranks (configs/tiny.toml)
    run = _cli_train(tmp_path / "one", optim={"warmup_steps": 0, "grad_accum": 2}, parallel={"dp_shard": 1})
    assert _export(_step_dir(fsdp_run), tmp_path / "a").exit_code == 0
    assert _export(_step_dir(run), tmp_path / "b").exit_code == 0
    ours, single = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert ours.keys() == single.keys()
    for name in single:  # FSDP sums the gradients of the two ranks in another order: equal to rounding
        torch.testing.assert_close(ours[name], single[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("layout", [{"tp": 2}, {"pp": 2}], ids=["tp2", "pp2"])
def test_the_export_of_a_tp2_or_pp2_checkpoint_equals_the_trainers_gathered_export(tmp_path, layout):
    out = tmp_path / "run"
    spawn(_train_rank, 2, _config_dict(out, dp_shard=1, **layout))
    result = _export(_step_dir(out), tmp_path / "exp")
    assert result.exit_code == 0, result.output
    _assert_same_export(tmp_path / "exp", out / "export")


# --- vfm generate -----------------------------------------------------------------------------------------

def _generate(checkpoint: Path, out: Path):
    return CliRunner().invoke(app, ["generate", "--checkpoint", str(checkpoint), "--prompt", "3", "--steps", "2",
                                    "--seed", "5", "-o", str(out)])


def test_generate_from_a_checkpoint_writes_the_video_of_its_export_with_the_same_seed(one_process_run, tmp_path):
    from_checkpoint = _generate(_step_dir(one_process_run), tmp_path / "a")
    from_export = _generate(one_process_run / "export", tmp_path / "b")
    assert from_checkpoint.exit_code == 0 and from_export.exit_code == 0, from_checkpoint.output + from_export.output
    assert f"generating from step {STEPS} of {_step_dir(one_process_run)}: EMA weights" in from_checkpoint.output
    assert (tmp_path / "a" / "0000.mp4").read_bytes() == (tmp_path / "b" / "0000.mp4").read_bytes()


def test_generate_given_a_run_without_an_export_names_its_newest_checkpoint(tmp_path):
    run = _cli_train(tmp_path / "run", checkpoint={"interval": 1, "keep": 5, "export": False})
    result = _generate(run, tmp_path / "out")
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert errors[0].endswith(f"its newest checkpoint is {_step_dir(run)}, which --checkpoint takes "
                              "(vfm export CHECKPOINT -o DIR writes its export)")


# --- refused -------------------------------------------------------------------------------------------------

def _copy(checkpoint: Path, where: Path) -> Path:
    import shutil

    return Path(shutil.copytree(checkpoint, where / checkpoint.name))


def _one_error(result) -> str:
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def test_a_checkpoint_with_a_truncated_tensor_file_is_refused_in_one_line(one_process_run, tmp_path):
    checkpoint = _copy(_step_dir(one_process_run), tmp_path)
    shard = next((checkpoint / "tensors").glob("*.safetensors"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    for result in (_export(checkpoint, tmp_path / "exp"), _generate(checkpoint, tmp_path / "videos")):
        line = _one_error(result)
        assert line.startswith(f"error: checkpoint {checkpoint} is damaged: tensors/{shard.name} has "), line
    assert not (tmp_path / "exp").exists() and not list((tmp_path / "videos").glob("*.mp4"))


def test_a_checkpoint_missing_one_ranks_tensor_file_is_refused_in_one_line(fsdp_run, tmp_path):
    checkpoint = _copy(_step_dir(fsdp_run), tmp_path)
    shard = sorted((checkpoint / "tensors").glob("*.safetensors"))[1]
    shard.unlink()
    line = _one_error(_export(checkpoint, tmp_path / "exp"))
    assert line == f"error: checkpoint {checkpoint} is damaged: tensors/{shard.name} is missing"


def test_a_checkpoint_missing_a_ranks_tensor_file_from_its_manifest_too_is_refused_in_one_line(fsdp_run, tmp_path):
    # the manifest rewritten to match (a crafted or hand-edited checkpoint): the headers left describe half-size
    # tensors, which the model recorded in state.json does not fit
    from vfm_parallel.checkpoint_integrity import write_manifest

    checkpoint = _copy(_step_dir(fsdp_run), tmp_path)
    sorted((checkpoint / "tensors").glob("*.safetensors"))[1].unlink()
    write_manifest(checkpoint, STEPS)
    line = _one_error(_export(checkpoint, tmp_path / "exp"))
    assert line.startswith(f"error: checkpoint {checkpoint}: its ema tensors do not fit the model in its state.json"), line
    assert "weights (32, 64) vs model (64, 64)" in line


def test_a_checkpoint_saved_without_export_settings_is_refused_naming_what_saves_them(one_process_run, tmp_path):
    from vfm_parallel.checkpoint_integrity import write_manifest

    checkpoint = _copy(_step_dir(one_process_run), tmp_path)
    state = json.loads((checkpoint / "state.json").read_text())
    del state["export"]
    (checkpoint / "state.json").write_text(json.dumps(state))
    write_manifest(checkpoint, STEPS)
    line = _one_error(_export(checkpoint, tmp_path / "exp"))
    assert line == (f"error: checkpoint {checkpoint} records no export settings (its state.json has no 'export': it was "
                    "saved by an earlier vfm); resume the run with this version (vfm train CONFIG) to save a checkpoint "
                    "that has them")


def test_a_checkpoint_whose_recorded_model_does_not_fit_its_tensors_is_refused_before_building_it(one_process_run, tmp_path):
    from vfm_parallel.checkpoint_integrity import write_manifest

    checkpoint = _copy(_step_dir(one_process_run), tmp_path)
    state = json.loads((checkpoint / "state.json").read_text())
    state["export"]["config"]["depth"] = 100_000  # would build 100000 blocks
    (checkpoint / "state.json").write_text(json.dumps(state))
    write_manifest(checkpoint, STEPS)
    line = _one_error(_export(checkpoint, tmp_path / "exp"))
    assert line.startswith(f"error: checkpoint {checkpoint}: its ema tensors do not fit the model in its state.json"), line


@pytest.mark.parametrize("key, value", [("guidance", float("nan")), ("latent_shape", "x"),
                                        ("formulation_options", {"sigma_data": float("inf")})],
                         ids=["nan-guidance", "latent-shape-not-a-shape", "inf-option"])
def test_a_checkpoint_whose_recorded_export_settings_are_invalid_is_refused_in_one_line(one_process_run, tmp_path, key, value):
    # state.json is parsed as Python parses JSON (NaN and Infinity pass): its export settings are checked as an
    # export's config.json is, before its weights are read, and nothing is written
    from vfm_parallel.checkpoint_integrity import write_manifest

    checkpoint = _copy(_step_dir(one_process_run), tmp_path)
    state = json.loads((checkpoint / "state.json").read_text())
    state["export"][key] = value
    (checkpoint / "state.json").write_text(json.dumps(state))
    write_manifest(checkpoint, STEPS)
    for result in (_export(checkpoint, tmp_path / "exp"), _generate(checkpoint, tmp_path / "videos")):
        line = _one_error(result)
        assert line.startswith(f"error: checkpoint {checkpoint} is damaged: state.json 'export': "), line
        assert key in line, line
    assert not (tmp_path / "exp").exists() and not list((tmp_path / "videos").glob("*.mp4"))
