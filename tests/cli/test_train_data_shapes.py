"""``vfm train`` checks every dataset's latent shape against the model before training, with
``--validate`` and at the start of a run: a patch that does not divide a bucket's latent (the
loader cropped it silently, and ``vfm generate`` then refused the export), more than one latent
frame for the 2-D sin-cos table, a pack shorter than one sample, durations longer than a bucket,
a bucket other than the first whose tokens cp does not divide, a bucket whose tokens sp cannot split
over tp, and (ST-DiT with cp-hybrid) a bucket
whose frames cannot be dealt whole to the cp ranks. Each is one ``error:`` line
naming the dataset folder, the latent shape, the rule and what is accepted."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from typer.testing import CliRunner

import vfm_models
from tests.cli.train_configs import tiny_shards_train
from vfm_cli.main import app

# (C, T, H, W): 12 channels = 3 colours x the pixel tokenizer's 2x2 patch, as `vfm shard` writes them
WIDE, SMALL = (12, 2, 8, 12), (12, 1, 6, 6)  # patch (1, 2, 2): 48 and 9 tokens
TEXT_DIM = 16

TRAIN = tiny_shards_train()


def _bucket(root, name, shape, n):
    from vfm_data import SampleMeta, ShardWriter, prepare_dataset

    encoder = vfm_models.get_text_encoder("hash")(dim=TEXT_DIM)
    g = torch.Generator().manual_seed(len(name))
    with ShardWriter(root / name) as w:
        for i in range(n):
            emb, _ = encoder.encode([f"clip {i}"])
            meta = SampleMeta(source="clip.mp4", span=(0, 1), fps=8, size=(shape[2] * 2, shape[3] * 2), caption=f"clip {i}",
                              modality="video" if shape[1] > 1 else "image", tokenizer="pixel", text_encoder="hash",
                              extra={"tokenizer_options": {"patch": 2}, "text_encoder_options": {"dim": TEXT_DIM}})
            w.write(f"{name}{i:03d}", torch.randn(shape, generator=g), emb[0], meta)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        prepare_dataset(root / name)
    return root / name


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two buckets written by vfm-data's writer and a blend over them, laid out as `vfm shard` does."""
    from vfm_data import write_blend

    root = tmp_path_factory.mktemp("shards")
    write_blend(root / "blend.yaml", [(_bucket(root, "wide", WIDE, 4), 4), (_bucket(root, "small", SMALL, 2), 2)])
    return root


def _train(tmp_path, shards, *sets: str, validate: bool = True, world_size: int = 0):
    (tmp_path / "train.toml").write_text(TRAIN)
    args = ["train", str(tmp_path / "train.toml"), "--set", f"data.blend={shards / 'blend.yaml'}",
            "--set", f"train.out_dir={tmp_path / 'run'}", *[a for s in sets for a in ("--set", s)]]
    if world_size:
        args += ["--world-size", str(world_size)]
    return CliRunner().invoke(app, [*args, "--validate"] if validate else args)


def _one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: config key "), result.output
    return lines[0]


def test_shards_the_patch_divides_are_valid(shards, tmp_path):
    result = _train(tmp_path, shards)
    assert result.exit_code == 0 and result.output.strip() == f"{tmp_path / 'train.toml'}: valid", result.output


def test_validate_refuses_a_patch_that_does_not_divide_a_bucket_naming_folder_shape_patch_and_what_is_accepted(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, "model.options.patch=[1,3,3]"))
    assert line == (f"error: config key 'model.options.patch': {shards / 'wide'}: latent (C, T, H, W) = (12, 2, 8, 12) is not "
                    f"divisible by the patch [1, 3, 3] (the loader would crop it, and vfm generate refuses that latent size "
                    f"from the export); accepted: a patch [pt, p, p] with pt in [1] and p in [1, 2], e.g. [1, 2, 2]")


def test_training_refuses_it_too_before_any_step(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, "model.options.patch=[1,4,4]", validate=False))
    assert f"{shards / 'small'}: latent (C, T, H, W) = (12, 1, 6, 6) is not divisible by the patch [1, 4, 4]" in line
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_temporal_patch_longer_than_a_bucket_is_refused(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, "model.options.patch=[2,2,2]"))
    assert f"{shards / 'small'}: latent (C, T, H, W) = (12, 1, 6, 6) is smaller than one patch [2, 2, 2]; accepted: " in line


def test_a_pack_shorter_than_one_sample_is_refused_naming_the_length_that_fits(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, "data.packing=true", "data.max_seq_len=32"))
    assert line == (f"error: config key 'data.max_seq_len': {shards / 'wide'}: one sample is 48 tokens (latent (C, T, H, W) = "
                    f"(12, 2, 8, 12), patch [1, 2, 2]) but a pack holds 32, so the loader would drop every sample of it; "
                    f"accepted: data.max_seq_len >= 48")
    assert _train(tmp_path, shards, "data.packing=true", "data.max_seq_len=48").exit_code == 0


def test_the_2d_sincos_table_refuses_video_buckets(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, 'model.options.pos_embed="sincos2d"'))
    assert line.startswith(f"error: config key 'model.options.pos_embed': {shards / 'wide'}: latent (C, T, H, W) = "
                           f"(12, 2, 8, 12) is 2 latent frames")
    assert "accepted: pos_embed 'sincos' or 'rope' for video, or image shards" in line


def test_durations_longer_than_a_bucket_are_refused(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, "data.durations=[2]"))
    assert line == (f"error: config key 'data.durations': {shards / 'small'}: latents of 1 frame are shorter than every "
                    f"duration [2]; accepted: durations of at most 1 latent frame")  # one frame, not "1 frames"


def test_cp_must_divide_the_tokens_of_every_bucket_not_only_the_first(shards, tmp_path):
    line = _one_error_line(_train(tmp_path, shards, "parallel.cp=2", "parallel.dp_shard=1", world_size=2))
    assert line.startswith(f"error: config key 'parallel': {shards / 'small'}: parallel layout")
    assert line.endswith("sequence length 9 tokens is not divisible by cp 2; accepted: cp 1, 3, 9")


def test_sp_must_divide_the_tokens_of_every_bucket_not_only_the_first(shards, tmp_path):
    # the small bucket's 9 tokens reached the first SP forward, which failed there on every rank
    sets = ["parallel.tp=2", "parallel.dp_shard=1", 'parallel.strategies=["sp"]']
    line = _one_error_line(_train(tmp_path, shards, *sets, world_size=2))
    assert line == (f"error: config key 'parallel.strategies': {shards / 'small'}: latent (C, T, H, W) = (12, 1, 6, 6): sp "
                    f"splits each sequence over tp = 2 ranks, but a sequence of 9 tokens does not divide by 2; accepted: "
                    f"tp 1, 3, 9 (dividing 9), or the strategy tp instead of sp (every rank keeps the whole sequence)")
    assert _train(tmp_path, shards, *sets[:2], 'parallel.strategies=["tp"]', world_size=2).exit_code == 0


def test_st_dit_cp_hybrid_needs_whole_frames_per_rank_in_every_bucket(shards, tmp_path):
    # the wide bucket's grid is (2, 4, 6): 2 frames cannot be dealt to cp=4 ranks one micro-batch at a time
    sets = ['model.family="stdit"', "data.blend=", f"data.shards=['{shards / 'wide'}']", "parallel.cp=4",
            "parallel.dp_shard=1", 'parallel.strategies=["cp-hybrid"]']
    line = _one_error_line(_train(tmp_path, shards, *sets, world_size=4))
    assert line.startswith(f"error: config key 'parallel': {shards / 'wide'}: latent (C, T, H, W) = (12, 2, 8, 12), "
                           f"data.micro_batch = 1: spatial attention by all-to-all deals whole groups to cp=4 ranks")
    assert _train(tmp_path, shards, *sets, "data.micro_batch=2", world_size=4).exit_code == 0
