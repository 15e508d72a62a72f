"""An export is data: every path its config.json names stays inside it (or a weights root the user
names), checked before anything is built; TorchScript loads only when the user opts in."""

from __future__ import annotations

import json
import os

import pytest
import torch

import vfm_models
from vfm_models.export import load_export, save_export
from vfm_models.export_paths import ExportPathError, check_export_paths
from vfm_models.tokenizers.cosmos import TorchScriptNotAllowedError

# pixel frames of 4 channels are the 4 latent channels of the model below (save_export refuses others)
META = {"family": "dit", "formulation": "edm", "tokenizer": "pixel", "tokenizer_options": {"patch": 1, "channels": 4},
        "latent_shape": [4, 1, 8, 8]}


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """A file that any TorchScript load (the code a crafted export would run) writes."""
    path = tmp_path / "marker"

    def jit_load(*args, **kwargs):
        path.touch()
        raise AssertionError("torch.jit.load was reached")

    monkeypatch.setattr(torch.jit, "load", jit_load)
    return path


@pytest.fixture
def cosmos_folder(tmp_path):
    """A Cosmos-named folder outside the export, with (dummy) TorchScript files."""
    folder = tmp_path / "elsewhere" / "Cosmos-Tokenizer-CV4x8x8"
    folder.mkdir(parents=True)
    for name in ("encoder.jit", "decoder.jit"):
        (folder / name).write_bytes(b"PK")
    return folder


def _export(folder, **meta):
    config = vfm_models.get_family("dit").config("tiny", in_channels=4, depth=1)
    save_export(folder, vfm_models.get_family("dit").build(config), {**META, **meta, "config": config})
    return folder


def test_a_tokenizer_path_outside_the_export_is_refused_naming_the_key_and_runs_nothing(tmp_path, marker, cosmos_folder):
    from vfm_infer.pipeline import ExportError, VideoPipeline

    export = _export(tmp_path / "export", tokenizer="cosmos", tokenizer_options={"path": str(cosmos_folder)})
    with pytest.raises(ExportPathError, match=rf"config.json key tokenizer_options.path = '{cosmos_folder}' resolves to .* "
                                              r"outside the export folder and every weights root .*--weights-root DIR"):
        load_export(export)
    with pytest.raises(ExportError, match="tokenizer_options.path"):
        VideoPipeline.from_export(export, allow_torchscript=True)  # even with TorchScript allowed
    assert not marker.exists()


@pytest.mark.parametrize("value", ["../elsewhere", "~/..", "/etc"])
def test_relative_home_and_absolute_escapes_are_refused(tmp_path, value):
    export = tmp_path / "export"
    export.mkdir()
    with pytest.raises(ExportPathError, match="text_encoder_options.path"):
        check_export_paths(export, {"text_encoder_options": {"path": value}})


def test_a_symlink_inside_the_export_that_leads_out_is_refused(tmp_path, cosmos_folder):
    export = tmp_path / "export"
    export.mkdir()
    os.symlink(cosmos_folder, export / "tok")
    with pytest.raises(ExportPathError, match=r"tokenizer_options.weights = 'tok' resolves to .*Cosmos-Tokenizer-CV4x8x8"):
        check_export_paths(export, {"tokenizer_options": {"weights": "tok"}})


def test_paths_inside_the_export_or_a_weights_root_resolve_to_absolute_paths(tmp_path, cosmos_folder):
    export = tmp_path / "export"
    (export / "te").mkdir(parents=True)
    meta = {"tokenizer_options": {"path": str(cosmos_folder), "tile": 4}, "text_encoder_options": {"path": "te"}}
    checked = check_export_paths(export, meta, weights_roots=[cosmos_folder.parent])
    assert checked["tokenizer_options"] == {"path": str(cosmos_folder.resolve()), "tile": 4}
    assert checked["text_encoder_options"]["path"] == str((export / "te").resolve())


def test_an_export_cannot_opt_itself_in_to_torchscript(tmp_path):
    meta = {"tokenizer_options": {"allow_torchscript": True, "patch": 1}}
    assert check_export_paths(tmp_path, meta)["tokenizer_options"] == {"patch": 1}


def test_cosmos_refuses_torchscript_unless_allowed_saying_how_to_opt_in(cosmos_folder, marker):
    with pytest.raises(TorchScriptNotAllowedError, match="--trust-torchscript"):
        vfm_models.get_tokenizer("cosmos")(cosmos_folder)
    assert not marker.exists()
    with pytest.raises(AssertionError, match="torch.jit.load was reached"):
        vfm_models.get_tokenizer("cosmos")(cosmos_folder, allow_torchscript=True)
    assert marker.exists()


def test_generate_with_an_export_naming_cosmos_inside_a_weights_root_still_needs_trust_torchscript(tmp_path, marker, cosmos_folder):
    from vfm_infer.pipeline import VideoPipeline

    export = _export(tmp_path / "export", tokenizer="cosmos", tokenizer_options={"path": str(cosmos_folder)})
    assert json.loads((export / "config.json").read_text())["tokenizer_options"]["path"] == str(cosmos_folder)
    with pytest.raises(TorchScriptNotAllowedError, match="refused unless you trust it"):
        VideoPipeline.from_export(export, weights_roots=[cosmos_folder.parent])
    assert not marker.exists()
