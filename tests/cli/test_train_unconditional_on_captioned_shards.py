"""``vfm train`` of a class-conditional family (``dit``) on shards that carry captions and no class labels
trains an unconditional model (num_classes 0); one ``warning:`` line says so at the start, under
``--validate`` too, naming the family and a text family to use instead. ``num_classes = 0`` written out
(an unconditional model asked for), a text family, or uncaptioned shards print none."""

from __future__ import annotations

import contextlib
import io

import pytest
from typer.testing import CliRunner

import vfm_models
from tests.cli.one_thread import one_thread_quiet_loader  # noqa: F401 (autouse)
from tests.cli.train_configs import tiny_shards_train
from vfm_cli.main import app

SHAPE, TEXT_DIM = (3, 2, 8, 8), 16
NOTE = "warning: model.family 'dit' is class-conditional"


def _write_shards(root, captions: list[str]):
    from vfm_data import SampleMeta, ShardWriter, prepare_dataset, write_blend
    from vfm_parallel.trainer.synthetic import make_blobs

    encoder = vfm_models.get_text_encoder("hash")(dim=TEXT_DIM)
    latents, _ = make_blobs(len(captions), SHAPE, 2, seed=0)
    with ShardWriter(root / "v") as w:
        for i, caption in enumerate(captions):
            meta = SampleMeta(source="synthetic.mp4", span=(0, 1), fps=8, size=SHAPE[2:], caption=caption, modality="video",
                              tokenizer="pixel", text_encoder="hash",
                              extra={"tokenizer_options": {"patch": 1}, "text_encoder_options": {"dim": TEXT_DIM}})
            w.write(f"v{i:03d}", latents[i], encoder.encode([caption])[0][0], meta)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        prepare_dataset(root / "v")
    write_blend(root / "blend.yaml", [(root / "v", len(captions))])
    return root / "blend.yaml"


@pytest.fixture(scope="module")
def captioned(tmp_path_factory):
    return _write_shards(tmp_path_factory.mktemp("captioned"), ["a red blob moving left", "a blue blob", "a blob", "fog"])


def _train(tmp_path, blend, *items, validate=True):
    config = tmp_path / "train.toml"
    config.write_text(tiny_shards_train())
    sets = [f"data.blend={blend}", f"train.out_dir={tmp_path / 'run'}", *items]
    args = ["train", str(config), *[a for item in sets for a in ("--set", item)]] + (["--validate"] if validate else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return [line for line in result.output.splitlines() if line.startswith(NOTE)]


@pytest.mark.parametrize("validate", [True, False], ids=["validate", "run"])
def test_a_class_conditional_family_on_captioned_shards_says_in_one_line_that_it_trains_unconditional(captioned, tmp_path, validate):
    notes = _train(tmp_path, captioned, "model.family=dit", validate=validate)
    assert len(notes) == 1, notes
    assert "the shards carry captions and no class labels" in notes[0]
    assert "the model trains unconditional" in notes[0]
    assert 'model.family = "dit-cross"' in notes[0] and "model.options.num_classes = 0" in notes[0]


def test_num_classes_zero_written_out_trains_unconditional_on_captioned_shards_without_the_note(captioned, tmp_path):
    assert _train(tmp_path, captioned, "model.family=dit", "model.options.num_classes=0") == []


def test_a_text_family_on_captioned_shards_has_no_note(captioned, tmp_path):
    assert _train(tmp_path, captioned) == []


def test_a_class_conditional_family_on_uncaptioned_shards_has_no_note(tmp_path):
    """`vfm shard --no-require-captions` footage: unconditional is the only model it can train."""
    blend = _write_shards(tmp_path / "shards", ["", "", ""])
    assert _train(tmp_path, blend, "model.family=dit") == []
