"""Attack: a shard folder from someone else whose samples record a text encoder (or tokenizer) path
outside the folder: ``extra.text_encoder_options.path = "/victim/models/t5"`` or ``"../../t5"``, a
link inside the folder leading out, or a model folder inside whose weights file links out.

``vfm train`` takes the shards' recorded options when the config names no encoder of its own, and
builds the encoder from them (condition dropout's null caption), so such shards made the victim's
run open any folder on the victim's disk. Shards are data: a recorded path must resolve inside the
dataset folder (docs/security.md); else the config is refused naming the key, the path and how to
name the encoder yourself. A path inside the folder still works, and a config naming its own
encoder (trusted) may point anywhere. Real vfm-data shards, a real tiny T5 folder."""

from __future__ import annotations

import contextlib
import io
import os
import shutil

import pytest
import torch

from vfm_cli import recipe
from vfm_cli.recipe.export import null_cond
from vfm_parallel.trainer import ConfigError, from_dict

pytest.importorskip("transformers")
TEXT_DIM = 16  # the tiny T5's d_model


@pytest.fixture(scope="module")
def victim_t5(tmp_path_factory):
    """A T5 folder of the victim's, outside any shard folder."""
    from tests.models.test_text_encoders import make_t5_folder

    folder = tmp_path_factory.mktemp("victim") / "models" / "t5"
    make_t5_folder(folder, "t5")
    return folder


def write_shards(folder, options: dict, n: int = 4):
    """One energon dataset whose samples record text encoder ``t5`` with ``options``."""
    from vfm_data import SampleMeta, ShardWriter, prepare_dataset

    torch.manual_seed(0)
    with ShardWriter(folder) as w:
        for i in range(n):
            meta = SampleMeta(source="s.mp4", span=(0, 1), fps=8, size=(8, 8), caption=f"a cat {i}", modality="video",
                              tokenizer="pixel", text_encoder="t5",
                              extra={"tokenizer_options": {"patch": 1}, "text_encoder_options": options})
            w.write(f"k{i:03d}", torch.randn(3, 2, 8, 8), torch.randn(3, TEXT_DIM), meta)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        prepare_dataset(folder)
    return folder


def config(tmp_path, folder, **model):
    return from_dict({
        "model": {"family": "dit-cross", "preset": "tiny", "options": {"patch": [1, 2, 2]}, **model},
        "data": {"source": "shards", "shards": [str(folder)], "micro_batch": 2},
        "train": {"steps": 1, "out_dir": str(tmp_path / "run"), "cond_dropout": 0.5},
        "checkpoint": {"export": False},
        "logging": {"tensorboard": False, "loss_curve": False, "progress": False, "peak_tflops": 1.0},
    })


def _escapes(tmp_path, victim_t5):
    """(recorded path, what it resolves to) for each way out of ``tmp_path / "shards" / "v"``."""
    v = tmp_path / "shards" / "v"
    v.mkdir(parents=True)
    up = os.path.relpath(victim_t5, v)  # ../../../victim/models/t5
    os.symlink(victim_t5, v / "encoder")  # a link inside the folder leading out
    inner = v / "t5-inner"  # a real model folder inside, whose weights file is the victim's
    shutil.copytree(victim_t5, inner)
    (inner / "model.safetensors").unlink()
    os.symlink(victim_t5 / "model.safetensors", inner / "model.safetensors")
    return v, {"absolute": (str(victim_t5), victim_t5), "relative": (up, victim_t5), "link": ("encoder", victim_t5),
               "link-inside": ("t5-inner", victim_t5 / "model.safetensors")}


@pytest.mark.parametrize("way", ["absolute", "relative", "link", "link-inside"])
def test_train_refuses_a_text_encoder_path_the_shards_record_outside_their_folder(tmp_path, victim_t5, way):
    v, escapes = _escapes(tmp_path, victim_t5)
    recorded, target = escapes[way]
    write_shards(v, {"path": recorded})
    with pytest.raises(ConfigError) as info:
        recipe.validate(config(tmp_path, v))
    message = " ".join(str(info.value).split())
    assert "model.text_encoder_options" in message, message
    assert f"text_encoder_options.path = {recorded!r}" in message and str(target) in message, message
    assert "outside the dataset folder" in message and "name the text encoder yourself in model.text_encoder" in message
    assert not (tmp_path / "run").exists()


def test_vfm_train_validate_names_the_recorded_path_and_exits_1(tmp_path, victim_t5):
    from typer.testing import CliRunner

    from vfm_cli.main import app

    v = write_shards(tmp_path / "shards" / "v", {"path": str(victim_t5), "max_length": 8})
    cfg = tmp_path / "train.toml"
    cfg.write_text(f'[model]\nfamily = "dit-cross"\npreset = "tiny"\noptions = {{ patch = [1, 2, 2] }}\n'
                   f'[data]\nsource = "shards"\nshards = ["{v}"]\n[train]\nout_dir = "{tmp_path / "run"}"\n')
    result = CliRunner().invoke(app, ["train", str(cfg), "--validate"])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert f"text_encoder_options.path = '{victim_t5}'" in out and "outside the dataset folder" in out, out


def test_a_path_inside_the_shard_folder_loads_and_a_config_naming_its_own_encoder_may_point_anywhere(tmp_path, victim_t5):
    v = tmp_path / "shards" / "v"
    shutil.copytree(victim_t5, v / "t5")
    write_shards(v, {"path": "t5", "max_length": 8, "allow_torchscript": True})
    r = recipe.validate(config(tmp_path, v))
    # relative to the dataset folder, made absolute (never resolved against the cwd); user-only options dropped
    assert r.text_encoder == "t5" and r.text_encoder_options == {"path": str((v / "t5").resolve()), "max_length": 8}
    cfg = config(tmp_path, v)
    null = null_cond(cfg, r)  # the real T5 built from the folder inside: the empty caption's embedding
    assert null is not None
    # the user's own config is trusted with any path (its other settings must be the shards': max_length)
    own = recipe.validate(config(tmp_path, v, text_encoder="t5", text_encoder_options={"path": str(victim_t5), "max_length": 8}))
    assert own.text_encoder_options == {"path": str(victim_t5), "max_length": 8}
