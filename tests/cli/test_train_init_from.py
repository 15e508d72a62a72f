"""``model.init_from``: ``vfm train`` fine-tunes a converted public model (a real diffusers DiT folder,
tiny and random) and exports it back to diffusers; a checkpoint of another size or family is refused
before training with the names that differ."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from vfm_cli.main import app

diffusers = pytest.importorskip("diffusers")
pytest.importorskip("vfm_models.formulations.ddpm")  # the formulation DiT was trained with

CONFIG = """
[model]
family = "dit"
formulation = "ddpm"
init_from = "{init}"

[data]
source = "synthetic"
latent_shape = [3, 1, 8, 8]
num_samples = 16
num_classes = 10
micro_batch = 4

[optim]
lr = 1e-4
warmup_steps = 1

[train]
steps = 2
out_dir = "{out}"

[checkpoint]
interval = 2

[logging]
interval = 1
tensorboard = false
progress = false
peak_tflops = 1.0
"""


def _hub(path):
    from tests.cli.test_convert_export import diffusers_folder

    return diffusers_folder(path, seed=3)


def _train(tmp_path, init, *sets):
    config = tmp_path / "finetune.toml"
    config.write_text(CONFIG.format(init=init, out=tmp_path / "run"))
    return CliRunner().invoke(app, ["train", str(config), *[a for s in sets for a in ("--set", s)]])


def test_vfm_train_fine_tunes_a_converted_dit_and_exports_it_to_diffusers(tmp_path):
    from vfm_models.adapters.exports import source_weights
    from vfm_models.checkpoint import load_state_dict

    _hub(tmp_path / "hub")
    assert CliRunner().invoke(app, ["convert", str(tmp_path / "hub"), "-o", str(tmp_path / "export")]).exit_code == 0
    result = _train(tmp_path, tmp_path / "export")
    assert result.exit_code == 0, result.output
    start = source_weights(tmp_path / "export")
    tuned = load_state_dict(tmp_path / "run" / "export" / "model.safetensors")
    assert tuned.keys() == start.keys()
    moved = max(float((tuned[k] - start[k]).abs().max()) for k in start)
    assert 0 < moved < 5e-3  # two small steps away from the public weights, not a fresh random init
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "--format", "diffusers", "-o", str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    back = diffusers.DiTTransformer2DModel.from_pretrained(tmp_path / "back")
    assert torch.equal(back.state_dict()["proj_out_2.weight"], tuned["final_layer.linear.weight"])


def test_init_from_a_diffusers_folder_directly_validates(tmp_path):
    _hub(tmp_path / "hub")
    config = tmp_path / "finetune.toml"
    config.write_text(CONFIG.format(init=tmp_path / "hub", out=tmp_path / "run"))
    result = CliRunner().invoke(app, ["train", str(config), "--validate"])
    assert result.exit_code == 0, result.output


def test_a_checkpoint_of_another_size_is_refused_before_training_with_the_names(tmp_path):
    _hub(tmp_path / "hub")
    config = tmp_path / "finetune.toml"
    config.write_text(CONFIG.format(init=tmp_path / "hub", out=tmp_path / "run"))
    result = CliRunner().invoke(app, ["train", str(config), "--validate", "--set", "model.options.depth=3"])
    assert result.exit_code == 1
    assert "config key 'model.init_from'" in result.output and "missing (14): blocks.2.adaln.linear.bias" in result.output
    result = CliRunner().invoke(app, ["train", str(config), "--validate", "--set", "model.options.hidden=64",
                                      "--set", "model.options.num_heads=4"])
    assert result.exit_code == 1 and "blocks.0.attn.q.weight: (32, 32) where (64, 64) is expected" in result.output
    assert not (tmp_path / "run").exists()


def test_another_family_or_formulation_is_refused_naming_the_key(tmp_path):
    _hub(tmp_path / "hub")
    config = tmp_path / "finetune.toml"
    config.write_text(CONFIG.format(init=tmp_path / "hub", out=tmp_path / "run"))
    result = CliRunner().invoke(app, ["train", str(config), "--validate", "--set", "model.family=dit-cross"])
    assert result.exit_code == 1 and "config key 'model.family'" in result.output and "holds a 'dit' model" in result.output
    result = CliRunner().invoke(app, ["train", str(config), "--validate", "--set", "model.formulation=edm"])
    assert result.exit_code == 1 and "was trained with 'ddpm'" in result.output
    result = CliRunner().invoke(app, ["train", str(config), "--validate", "--set", f"model.init_from={tmp_path / 'none'}"])
    assert result.exit_code == 1 and "config key 'model.init_from'" in result.output and "no checkpoint at" in result.output


def _bare_dit_pt(path):
    """A facebookresearch DiT ``.pt`` (its train.py's {"model", "ema"}) of DiT-S width (384 wide, 6 heads:
    a bare file names no head count) with one block, at input size 8."""
    from vfm_models.adapters import get_adapter

    torch.manual_seed(0)
    model = diffusers.DiTTransformer2DModel(num_attention_heads=6, attention_head_dim=64, in_channels=3, out_channels=6,
                                            num_layers=1, sample_size=8, patch_size=2, num_embeds_ada_norm=10)
    hub, fb = get_adapter("diffusers-dit"), get_adapter("facebookresearch-dit")
    options = hub.options_from_external(dict(model.config))
    original = fb.to_external(hub.from_external(model.state_dict(), options), {**options, "input_size": 8})
    torch.save({"model": original, "ema": original}, path)
    return path


def test_a_bare_pt_is_converted_once_by_a_run_and_once_by_validate(tmp_path, monkeypatch):
    # its meta (read twice), its shapes and its weights all come from the one conversion of the file
    import vfm_models.adapters.exports as exports

    conversions, real = [], exports.converted
    monkeypatch.setattr(exports, "converted", lambda *a, **k: conversions.append(a[0]) or real(*a, **k))
    config = tmp_path / "finetune.toml"
    config.write_text(CONFIG.format(init=_bare_dit_pt(tmp_path / "dit.pt"), out=tmp_path / "run"))
    result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output
    assert len(conversions) == 1
    conversions.clear()
    result = CliRunner().invoke(app, ["train", str(config), "--validate", "--set", f"train.out_dir={tmp_path / 'new'}"])
    assert result.exit_code == 0, result.output
    assert len(conversions) == 1
