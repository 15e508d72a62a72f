"""Attacks on an export's own files, as ``vfm generate`` / ``load_export`` read them:

- ``model.safetensors`` or ``config.json`` a symbolic link to another file of the victim's (the
  export generated with the victim's private weights, or read their file as its config);
- a model folder inside the export (its text encoder) whose weights file links out of it (each
  path the config names was checked, not the files under it);
- ``config.json`` with a key twice (a reviewer or another JSON reader sees the first value, Python
  the last), ``NaN`` / ``Infinity`` / ``1e999`` numbers, or a guidance scale / condition dropout out
  of range or of the wrong type.

Each is refused naming the file and the key or value; real exports written by ``save_export``."""

from __future__ import annotations

import json
import os

import pytest

import vfm_models
from vfm_models.export import load_export, read_meta, save_export
from vfm_models.export_paths import ExportPathError

# pixel frames of 4 channels are the 4 latent channels of the model below (save_export refuses others)
META = {"family": "dit", "formulation": "edm", "tokenizer": "pixel", "tokenizer_options": {"patch": 1, "channels": 4},
        "latent_shape": [4, 1, 8, 8]}


def _export(folder, seed=0, **meta):
    import torch

    torch.manual_seed(seed)
    config = vfm_models.get_family("dit").config("tiny", in_channels=4, depth=1)
    save_export(folder, vfm_models.get_family("dit").build(config), {**META, **meta, "config": config})
    return folder


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_an_export_file_linking_to_another_file_of_the_victims_is_refused(tmp_path, name):
    victim = _export(tmp_path / "victim", seed=1)  # the victim's own model, elsewhere on the disk
    export = _export(tmp_path / "export")
    (export / name).unlink()
    os.symlink(victim / name, export / name)
    with pytest.raises(ExportPathError, match=rf"{name} is a symbolic link to {victim / name}, outside the export folder"):
        load_export(export)


def test_an_init_from_export_whose_weights_link_to_the_victims_file_is_refused(tmp_path):
    """``init_from`` (fine-tuning from an export) reads the weights through the same rule."""
    from vfm_models.adapters.exports import source_shapes, source_weights

    victim = _export(tmp_path / "victim", seed=1)
    export = _export(tmp_path / "export")
    (export / "model.safetensors").unlink()
    os.symlink(victim / "model.safetensors", export / "model.safetensors")
    for read in (source_weights, source_shapes):
        with pytest.raises(ExportPathError, match="outside the export folder"):
            read(export)


def test_a_link_inside_the_export_to_its_own_file_is_accepted(tmp_path):
    export = _export(tmp_path / "export")
    (export / "weights").mkdir()
    os.replace(export / "model.safetensors", export / "weights" / "model.safetensors")
    os.symlink("weights/model.safetensors", export / "model.safetensors")
    model, _ = load_export(export)
    assert sum(p.numel() for p in model.parameters()) > 0


def test_a_model_folder_in_the_export_whose_weights_link_out_is_refused(tmp_path):
    pytest.importorskip("transformers")
    from tests.models.test_text_encoders import make_t5_folder

    victim = tmp_path / "victim" / "t5"
    make_t5_folder(victim, "t5")
    export = _export(tmp_path / "export", text_encoder="t5", text_encoder_options={"path": "te"})
    make_t5_folder(export / "te", "t5")
    (export / "te" / "model.safetensors").unlink()
    os.symlink(victim / "model.safetensors", export / "te" / "model.safetensors")
    with pytest.raises(ExportPathError, match=r"text_encoder_options.path = 'te' holds the symbolic link .*te/model.safetensors, "
                                              rf"which resolves to {victim / 'model.safetensors'}, outside the export folder"):
        load_export(export)


def _rewrite(export, text: str):
    (export / "config.json").write_text(text)
    return export


def test_a_key_twice_in_config_json_is_refused(tmp_path):
    export = _export(tmp_path / "export")
    text = (export / "config.json").read_text()
    # a reader that keeps the first value sees the pixel tokenizer; Python's json took the second
    doubled = text.replace('"tokenizer": "pixel"', '"tokenizer": "pixel", "tokenizer": "cosmos"', 1)
    assert doubled != text and json.loads(doubled)["tokenizer"] == "cosmos"
    with pytest.raises(ValueError, match=r"config.json: key 'tokenizer' appears twice in one object; accepted: each key once"):
        read_meta(_rewrite(export, doubled))


def test_config_json_that_does_not_parse_is_refused_naming_the_file_and_the_position(tmp_path):
    export = _rewrite(_export(tmp_path / "export"), '{"family": "dit",\n "config": {"hidden": 32,}\n}')
    with pytest.raises(json.JSONDecodeError) as err:  # still what callers catching the json error expect
        read_meta(export)
    assert str(err.value) == (f"{export / 'config.json'} is not valid JSON: Expecting property name enclosed in double "
                              "quotes at line 2, column 26 (char 43)")


def test_a_diffusers_config_json_that_does_not_parse_is_refused_naming_the_file_and_the_position(tmp_path):
    from vfm_models.adapters.io import read_folder_config

    (tmp_path / "config.json").write_text('{"_class_name": "DiTTransformer2DModel",}')
    with pytest.raises(json.JSONDecodeError) as err:
        read_folder_config(tmp_path)
    assert str(err.value) == (f"{tmp_path / 'config.json'} is not valid JSON: Expecting property name enclosed in "
                              "double quotes at line 1, column 41 (char 40)")


def test_config_json_nested_too_deep_to_read_is_refused_naming_the_file_not_a_recursion_traceback(tmp_path):
    export = _rewrite(_export(tmp_path / "export"), '{"family": "dit", "config": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(json.JSONDecodeError, match=r"nested 100001 levels deep, deeper than Python.s JSON reader follows") as err:
        read_meta(export)
    assert str(err.value).startswith(f"{export / 'config.json'} is not valid JSON: arrays and objects nested")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_numbers_that_are_not_finite_are_refused(tmp_path, number):
    export = _export(tmp_path / "export")
    meta = json.loads((export / "config.json").read_text())
    text = json.dumps({**meta, "guidance": "X"}).replace('"X"', number)
    with pytest.raises(ValueError, match=rf"config.json: .*{number}.* (not finite|not a JSON number); accepted: finite numbers"):
        read_meta(_rewrite(export, text))


@pytest.mark.parametrize("key, value", [("guidance", 1e300), ("guidance", True), ("guidance", "7"),
                                        ("cond_dropout", 5.0), ("cond_dropout", -0.1)])
def test_guidance_and_cond_dropout_out_of_range_are_refused(tmp_path, key, value):
    export = _export(tmp_path / "export")
    meta = json.loads((export / "config.json").read_text())
    with pytest.raises(ValueError, match=rf"config.json: {key} must be a number in \["):
        read_meta(_rewrite(export, json.dumps({**meta, key: value})))


def test_a_latent_shape_of_bools_or_not_a_list_is_refused(tmp_path):
    export = _export(tmp_path / "export")
    meta = json.loads((export / "config.json").read_text())
    for shape in ([True, 1, 8, 8], 4):
        with pytest.raises(ValueError, match="latent_shape must be"):
            read_meta(_rewrite(export, json.dumps({**meta, "latent_shape": shape})))


def test_save_export_replaces_links_in_the_folder_and_never_writes_through_them(tmp_path):
    """A run folder from elsewhere, resumed: its export/ holds config.json, model.safetensors and the
    temporary name config.json.tmp that save_export wrote first, as links to the victim's files (the
    config was written through config.json.tmp into the victim's file). The export written at the end
    replaces the links and leaves those files alone; its files get the usual permissions (safetensors
    alone leaves 0600)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "settings.json").write_text('{"mine": 1}\n')
    (victim / "weights.bin").write_bytes(b"victim weights")
    export = tmp_path / "run" / "export"
    export.mkdir(parents=True)
    os.symlink(victim / "settings.json", export / "config.json")
    os.symlink(victim / "weights.bin", export / "model.safetensors")
    os.symlink(victim / "settings.json", export / "config.json.tmp")
    _export(export)
    assert (victim / "settings.json").read_text() == '{"mine": 1}\n' and (victim / "weights.bin").read_bytes() == b"victim weights"
    assert not (export / "config.json").is_symlink() and not (export / "model.safetensors").is_symlink()
    assert sorted(p.name for p in export.iterdir()) == ["config.json", "config.json.tmp", "model.safetensors"]  # none of ours left
    mask = os.umask(0o022)
    os.umask(mask)
    for name in ("config.json", "model.safetensors"):  # the permissions of any new file, not mkstemp's 0600
        assert (export / name).stat().st_mode & 0o777 == 0o666 & ~mask
    model, meta = load_export(export)
    assert meta["family"] == "dit"


def test_a_link_to_a_folder_inside_the_export_is_followed_to_a_link_out_beyond_it(tmp_path):
    """te/sub -> ../x (inside), x/weights.safetensors -> the victim's file: a reader of te/sub/weights.safetensors
    reaches the victim's file through two links, each of which looks harmless alone."""
    from vfm_models.export_paths import check_export_paths

    export = tmp_path / "export"
    (export / "te").mkdir(parents=True)
    (export / "x").mkdir()
    victim = tmp_path / "victim.safetensors"
    victim.write_bytes(b"victim")
    os.symlink(victim, export / "x" / "weights.safetensors")
    os.symlink("../x", export / "te" / "sub")
    os.symlink("../te", export / "x" / "loop")  # a loop of links ends
    with pytest.raises(ExportPathError, match=rf"holds the symbolic link .*x/weights.safetensors, which resolves to {victim}"):
        check_export_paths(export, {"text_encoder_options": {"path": "te"}})
    (export / "x" / "weights.safetensors").unlink()
    assert check_export_paths(export, {"text_encoder_options": {"path": "te"}})["text_encoder_options"]["path"] == str(export / "te")


@pytest.mark.timeout(60)
def test_an_export_whose_weights_are_a_named_pipe_is_refused_naming_it_not_waited_on(tmp_path):
    """safetensors opened the pipe and waited for a writer forever, in Rust code that no Ctrl-C reaches
    (``vfm generate`` refused it earlier as missing; ``load_export`` and ``VideoPipeline.from_export`` hung)."""
    export = _export(tmp_path / "export")
    (export / "model.safetensors").unlink()
    os.mkfifo(export / "model.safetensors")
    with pytest.raises(ExportPathError, match=r"model\.safetensors is not a regular file \(a named pipe"):
        load_export(export)
