"""``vfm train`` with ``data.blend`` naming the output folder of ``vfm shard`` trains on that folder's
blend.yaml (the folder itself is no energon dataset: it was refused as untrusted metadata), and a
blend that does not exist is one line saying so (not advice to --trust-dataset-code)."""

from __future__ import annotations

from typer.testing import CliRunner

from tests.cli.train_configs import tiny_shards_train
from vfm_cli.main import app
from vfm_curator.synth import make_video

TRAIN = tiny_shards_train(", text_dim = 64")


def _shards(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [12, 12], width=48, height=32, seed=3)
    curate = tmp_path / "curate.toml"
    curate.write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.25\n')
    runner = CliRunner()
    result = runner.invoke(app, ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "clips"), "--config", str(curate), "--no-progress"])
    assert result.exit_code == 0, result.output
    shard = tmp_path / "shard.toml"
    shard.write_text('[shard]\ntokenizer = "pixel"\ntext_encoder = "hash"\nresolutions = [[16, 16]]\nframes = [4]\n'
                     '[shard.tokenizer_options]\npatch = 2\n[run]\nrunner = "serial"\n')
    result = runner.invoke(app, ["shard", str(tmp_path / "clips"), "-o", str(tmp_path / "shards"), "--config", str(shard),
                                 "--no-require-captions", "--no-progress"])
    assert result.exit_code == 0, result.output
    return tmp_path / "shards"


def test_train_reads_the_blend_of_a_vfm_shard_output_folder(tmp_path):
    shards = _shards(tmp_path)
    (tmp_path / "train.toml").write_text(TRAIN)
    base = ["train", str(tmp_path / "train.toml"), "--set", f"data.blend={shards}", "--set", f"train.out_dir={tmp_path / 'run'}"]
    validated = CliRunner().invoke(app, [*base, "--validate"])
    # valid against the shards themselves (their latent shape read), not "shards not found here"
    assert validated.exit_code == 0 and validated.output.strip() == f"{tmp_path / 'train.toml'}: valid", validated.output
    trained = CliRunner().invoke(app, base)
    assert trained.exit_code == 0, trained.output
    assert (tmp_path / "run" / "checkpoints" / "step_00000001").is_dir()


def test_train_with_a_blend_that_does_not_exist_says_so_in_one_line(tmp_path):
    (tmp_path / "train.toml").write_text(TRAIN)
    missing = tmp_path / "nope" / "blend.yaml"
    result = CliRunner().invoke(app, ["train", str(tmp_path / "train.toml"), "--set", f"data.blend={missing}",
                                      "--set", f"train.out_dir={tmp_path / 'run'}"])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == (f"error: config key 'data.blend': {missing} does not exist; accepted: the blend.yaml "
                                     "that `vfm shard` writes, its output folder, or prepared dataset folders (with .nv-meta/)")
