"""``model.init_from = "RUN/checkpoints/step_<N>"``: a run fine-tunes from a training checkpoint as from its
export (the EMA weights when the run had EMA, as ``vfm export`` takes them), verified whole first; a folder
that is none of the accepted kinds is named with what is accepted."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from tests.cli.test_export_checkpoint import TINY, _cli_train, _sets, _step_dir, one_process_run  # noqa: F401 - fixture
from vfm_cli.main import app


def _model_part(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's own model weights (not its EMA), read as the trainer saved them."""
    import json

    import vfm_models
    from vfm_parallel import checkpoint as ckpt

    meta = json.loads((checkpoint / "state.json").read_text())["export"]
    family = vfm_models.get_family(meta["family"])
    model = family.build(family.config(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()}))
    ckpt.load_weights(checkpoint, model, "model")
    return model.state_dict()


def _max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_a_run_fine_tuned_from_a_checkpoint_folder_starts_from_its_ema_weights(one_process_run, tmp_path):  # noqa: F811
    checkpoint = _step_dir(one_process_run)
    assert CliRunner().invoke(app, ["export", str(checkpoint), "--format", "vfm", "-o", str(tmp_path / "ema")]).exit_code == 0
    ema = load_file(str(tmp_path / "ema" / "model.safetensors"))
    # a learning rate too small to move a weight by 1e-6 in two steps: the run ends where it started
    tuned_run = _cli_train(tmp_path / "tuned", model={"init_from": str(checkpoint)}, optim={"warmup_steps": 0, "lr": 1e-9})
    tuned = load_file(str(tuned_run / "export" / "model.safetensors"))
    assert _max_difference(tuned, ema) < 1e-6
    # the EMA weights, not the model's: 10x the match above apart (after 2 warmed updates the EMA is 82% the
    # step-2 weights; 7e-5 apart here)
    assert _max_difference(ema, _model_part(checkpoint)) > 1e-5


def test_a_damaged_checkpoint_folder_as_init_from_is_refused_in_one_line_before_any_step(one_process_run, tmp_path):  # noqa: F811
    checkpoint = Path(shutil.copytree(_step_dir(one_process_run), tmp_path / "copy" / "checkpoints" / "step_00000002"))
    shard = next((checkpoint / "tensors").glob("*.safetensors"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # one weight's last byte: the headers still read, only the manifest's hash tells
    shard.write_bytes(bytes(data))
    result = CliRunner().invoke(app, ["train", str(TINY), *_sets({"model": {"init_from": str(checkpoint)},
                                                                 "train": {"out_dir": str(tmp_path / "run"), "steps": 1},
                                                                 "optim": {"warmup_steps": 0}})])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert f"checkpoint {checkpoint} is damaged: tensors/" in errors[0] and "the manifest says" in errors[0], errors[0]
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_run_folder_as_init_from_names_what_is_accepted_and_its_newest_checkpoint(one_process_run, tmp_path):  # noqa: F811
    result = CliRunner().invoke(app, ["train", str(TINY), "--validate",
                                      *_sets({"model": {"init_from": str(one_process_run / "checkpoints")}})])
    assert result.exit_code == 1, result.output
    assert "a training checkpoint (RUN/checkpoints/step_<N>)" in result.output
    assert f"its newest checkpoint is {_step_dir(one_process_run)}" in result.output
