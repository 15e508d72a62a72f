"""``vfm convert`` and ``vfm export``: a public-format checkpoint (a real diffusers DiTTransformer2DModel
folder, tiny and random) becomes a vfm export that ``vfm generate`` samples, and goes back to a diffusers
folder that ``from_pretrained`` loads with the same weights; ``vfm generate`` takes the diffusers folder
directly too. Bad input is one line naming what differs."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from vfm_cli.main import app

diffusers = pytest.importorskip("diffusers")

TINY = dict(num_attention_heads=2, attention_head_dim=16, in_channels=3, out_channels=6, num_layers=2,
            sample_size=8, patch_size=2, num_embeds_ada_norm=10)


def invoke(*args):
    return CliRunner().invoke(app, [*map(str, args)])


def diffusers_folder(path, seed=0, **overrides):
    """A random tiny diffusers DiT saved with diffusers' own save_pretrained (learned sigma: 3 -> 6
    channels, so the pixel tokenizer decodes it); embedders shared across blocks as DiT converts them."""
    torch.manual_seed(seed)
    model = diffusers.DiTTransformer2DModel(**{**TINY, **overrides}).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.05)
        shared = model.transformer_blocks[0].norm1.emb.state_dict()
        for block in model.transformer_blocks[1:]:
            block.norm1.emb.load_state_dict(shared)
    model.save_pretrained(path)
    return model


def test_convert_then_export_to_diffusers_round_trips_the_weights_and_the_output(tmp_path):
    ref = diffusers_folder(tmp_path / "hub")
    result = invoke("convert", tmp_path / "hub", "--from", "auto", "-o", tmp_path / "export", "--tokenizer", "pixel")
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "export" / "config.json").read_text())
    assert (meta["family"], meta["formulation"], meta["latent_shape"]) == ("dit", "ddpm", [3, 1, 8, 8])
    assert meta["converted_from"] == {"adapter": "diffusers-dit"} and meta["null_condition"] == {"kind": "class", "label": 10}
    assert meta["config"]["out_channels"] == 6 and meta["config"]["pos_embed"] == "sincos2d"

    result = invoke("export", tmp_path / "export", "--format", "diffusers", "-o", tmp_path / "back")
    assert result.exit_code == 0, result.output
    back = diffusers.DiTTransformer2DModel.from_pretrained(tmp_path / "back").eval()
    assert dict(back.config)["sample_size"] == 8
    for key, value in ref.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    x, t, y = torch.randn(2, 3, 8, 8), torch.tensor([10.0, 900.0]), torch.tensor([1, 10])
    with torch.no_grad():
        assert torch.equal(back(x, timestep=t, class_labels=y).sample, ref(x, timestep=t, class_labels=y).sample)


def test_export_from_a_run_folder_as_vfm_writes_a_loadable_export(tmp_path):
    from vfm_models.export import load_export

    diffusers_folder(tmp_path / "hub", seed=1)
    assert invoke("convert", tmp_path / "hub", "-o", tmp_path / "run" / "export").exit_code == 0
    result = invoke("export", tmp_path / "run", "--format", "vfm", "-o", tmp_path / "copy")  # a run: its export/
    assert result.exit_code == 0, result.output
    model, meta = load_export(tmp_path / "copy")
    original, _ = load_export(tmp_path / "run" / "export")
    assert meta["family"] == "dit" and all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), original.state_dict().values()))


def test_generate_samples_a_converted_export_and_the_diffusers_folder_alike(tmp_path):
    pytest.importorskip("vfm_models.formulations.ddpm")  # the DDPM formulation DiT was trained with
    from vfm_infer.video.contact_sheet import read_png

    diffusers_folder(tmp_path / "hub", seed=2)
    assert invoke("convert", tmp_path / "hub", "-o", tmp_path / "export", "--tokenizer", "pixel").exit_code == 0
    common = ("--prompt", "3", "--steps", "3", "--seed", "4", "--guidance", "1.5")
    result = invoke("generate", "--checkpoint", tmp_path / "export", *common, "-o", tmp_path / "a")
    assert result.exit_code == 0, result.output
    result = invoke("generate", "--checkpoint", tmp_path / "hub", "--tokenizer", "pixel", *common, "-o", tmp_path / "b")
    assert result.exit_code == 0, result.output
    a, b = read_png(tmp_path / "a" / "0000.png"), read_png(tmp_path / "b" / "0000.png")
    assert a.shape[2] == 3 and (a == b).all()
    result = invoke("generate", "--checkpoint", tmp_path / "hub", *common, "-o", tmp_path / "c")
    assert result.exit_code == 1 and "diffusers model folder" in result.output and "--tokenizer NAME" in result.output


def test_convert_refuses_weights_of_another_size_with_the_names_that_differ(tmp_path):
    diffusers_folder(tmp_path / "hub", num_layers=3)
    config = json.loads((tmp_path / "hub" / "config.json").read_text())
    config["num_layers"] = 2  # the config of a smaller model next to a bigger model's weights
    (tmp_path / "hub" / "config.json").write_text(json.dumps(config))
    result = invoke("convert", tmp_path / "hub", "-o", tmp_path / "export")
    assert result.exit_code == 1
    assert "unexpected" in result.output and "transformer_blocks.2.attn1.to_q.weight" in result.output
    assert not (tmp_path / "export" / "model.safetensors").exists()


def test_convert_refuses_an_unknown_class_and_an_unknown_adapter(tmp_path):
    diffusers_folder(tmp_path / "hub")
    config = json.loads((tmp_path / "hub" / "config.json").read_text())
    (tmp_path / "hub" / "config.json").write_text(json.dumps({**config, "_class_name": "UNet2DModel"}))
    result = invoke("convert", tmp_path / "hub", "-o", tmp_path / "export")
    assert result.exit_code == 1 and "'UNet2DModel' has no registered adapter" in result.output
    assert "DiTTransformer2DModel (diffusers-dit)" in result.output
    result = invoke("convert", tmp_path / "hub", "--from", "nope", "-o", tmp_path / "export")
    assert result.exit_code == 1 and "unknown adapter 'nope'; available:" in result.output


def test_export_refuses_a_model_diffusers_cannot_express_with_the_fields(tmp_path):
    from tests.infer.tiny import tiny_dit, tiny_meta
    from vfm_models.export import save_export

    model = tiny_dit()  # vfm's own dit: 3-D sin-cos positions, DiT's timestep features
    save_export(tmp_path / "export", model, {**tiny_meta(), "config": model.config})
    result = invoke("export", tmp_path / "export", "--format", "diffusers", "-o", tmp_path / "back")
    assert result.exit_code == 1
    assert "cannot be written as a diffusers DiTTransformer2DModel" in result.output and "pos_embed = 'sincos'" in result.output
    assert not (tmp_path / "back").exists()
    (tmp_path / "nothing").mkdir()  # a folder of none of the kinds export takes (a missing one is named as missing)
    result = invoke("export", tmp_path / "nothing", "--format", "diffusers", "-o", tmp_path / "back")
    assert result.exit_code == 1 and "neither a vfm export" in result.output
