"""Inference export: save_export / load_export round trip through config.json + model.safetensors."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pytest
import torch

import vfm_models
from vfm_models import host
from vfm_models.checkpoint import CheckpointMismatchError, save_state_dict
from vfm_models.export import load_export, save_export
from vfm_models.families import ModelFamily
from vfm_models.plugins import hookimpl


@dataclass(frozen=True)
class TinyConfig:
    channels: int = 2
    hidden: int = 8
    kernel: tuple[int, int] = (1, 3)


class TinyNet(torch.nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        assert isinstance(cfg.kernel, tuple), "config lists come back as tuples"
        self.inp = torch.nn.Conv3d(cfg.channels, cfg.hidden, (1, *cfg.kernel[1:] * 2), padding=(0, 1, 1))
        self.t = torch.nn.Linear(1, cfg.hidden)
        self.out = torch.nn.Conv3d(cfg.hidden, cfg.channels, 1)

    def forward(self, x, t, cond):
        return self.out(torch.tanh(self.inp(x) + self.t(t[:, None])[:, :, None, None, None]))


FAMILY = ModelFamily("export-test-net", TinyConfig, TinyNet, presets={"S": {"hidden": 8}, "M": {"hidden": 16}})


@hookimpl
def vfm_models_register_families(register):
    register("export-test-net", FAMILY)


@pytest.fixture
def family_registered(monkeypatch):
    """Registers this module as one more plugin of the vfm_models host, for this test only."""
    monkeypatch.setattr(host, "builtins", (*host.builtins, __name__))
    assert sys.modules[__name__]
    host.reload()
    yield FAMILY
    monkeypatch.undo()
    host.reload()


META = {
    "family": "export-test-net",
    "formulation": "edm",
    "formulation_options": {"sigma_data": 0.5},
    "tokenizer": "pixel",
    "tokenizer_options": {"patch": 1},
    "text_encoder": "hash",
    "text_encoder_options": {"dim": 16},
    "latent_shape": [2, 1, 4, 4],
}


def test_export_round_trip_rebuilds_the_model_by_family_name(family_registered, tmp_path):
    torch.manual_seed(0)
    config = FAMILY.config("S")
    model = FAMILY.build(config)
    save_export(tmp_path, model, {**META, "config": config})
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["config"] == {"channels": 2, "hidden": 8, "kernel": [1, 3]}
    assert meta["vfm_models_version"] == vfm_models.__version__
    loaded, loaded_meta = load_export(tmp_path)
    assert loaded_meta == meta and not loaded.training
    x, t = torch.randn(2, 2, 1, 4, 4), torch.rand(2)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, t, {}), model(x, t, {}), rtol=0, atol=0)
    form = vfm_models.get_formulation(meta["formulation"])(**meta["formulation_options"])
    assert form.sigma_data == 0.5


def test_weights_that_do_not_fit_the_config_name_the_differing_keys_and_shapes(family_registered, tmp_path):
    save_export(tmp_path, FAMILY.create("M"), {**META, "config": {"hidden": 16}})
    meta = json.loads((tmp_path / "config.json").read_text())
    meta["config"]["hidden"] = 8
    (tmp_path / "config.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointMismatchError) as err:
        load_export(tmp_path)
    message = str(err.value)
    assert "inp.weight: weights (16, 2, 1, 3, 3) vs model (8, 2, 1, 3, 3)" in message
    assert "out.weight" in message and "t.bias" in message

    state = FAMILY.create("S").state_dict()
    state.pop("t.bias")
    state["extra.weight"] = torch.zeros(1)
    differing = r"missing from the weights \(1\): t\.bias\nnot in the model \(1\): extra\.weight"
    with pytest.raises(CheckpointMismatchError, match=differing):  # refused when written, as when loaded
        save_export(tmp_path / "other", state, {**META, "config": {"hidden": 8}})
    save_export(tmp_path, FAMILY.create("S"), {**META, "config": {"hidden": 8}})
    save_state_dict(tmp_path / "model.safetensors", state, {"format": "vfm-export", "family": META["family"]})  # from elsewhere
    with pytest.raises(CheckpointMismatchError, match=differing):
        load_export(tmp_path)


def test_export_meta_and_folder_errors_say_what_is_expected(family_registered, tmp_path):
    with pytest.raises(ValueError, match="lacks config; an export needs family, config"):
        save_export(tmp_path, FAMILY.create(), {"family": "export-test-net"})
    with pytest.raises(ValueError, match=r"latent_shape must be \[C, T, H, W\]"):
        save_export(tmp_path, FAMILY.create(), {**META, "config": {}, "latent_shape": [2, 4, 4]})
    with pytest.raises(FileNotFoundError, match="config.json is missing"):
        load_export(tmp_path)
    with pytest.raises(ValueError, match=r"family 'no-such-family' is not registered; accepted: .*export-test-net"):
        save_export(tmp_path, FAMILY.create(), {**META, "family": "no-such-family", "config": {}})
    # an export from elsewhere (written by a vfm with that family's plugin) is refused when loaded
    save_export(tmp_path, FAMILY.create(), {**META, "config": {}})
    meta = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**meta, "family": "no-such-family"}))
    with pytest.raises(KeyError, match=r"unknown famil\w* 'no-such-family'; available: .*export-test-net"):
        load_export(tmp_path)


def test_export_latent_shapes_must_be_a_list_of_latent_shapes(family_registered, tmp_path):
    for bad in ([], [[2, 4, 4]], [2, 1, 4, 4], [[2, 1, 4, 0]]):
        with pytest.raises(ValueError, match=r"latent_shapes must be a non-empty list of \[C, T, H, W\]"):
            save_export(tmp_path, FAMILY.create(), {**META, "config": {}, "latent_shapes": bad})
    save_export(tmp_path, FAMILY.create(), {**META, "config": {}, "latent_shapes": [[2, 1, 4, 4], [2, 1, 4, 6]]})
