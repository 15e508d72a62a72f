"""``vfm train`` with ``[validation]`` and ``[preview]``: a tiny run writes the held-out loss into its metrics
(file, TensorBoard) and H264 preview videos with a contact sheet per preview step; the held-out clips come
from the shards' val split (a text model previews their captions); missing held-out data is one error line."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tomllib
from pathlib import Path

import torch
import vfm_models
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_parallel.trainer.synthetic import make_blobs

from tests.cli.one_thread import one_thread_quiet_loader  # noqa: F401 (autouse)

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"
SMALL = ["train.steps=4", "optim.warmup_steps=0", "logging.progress=false", "logging.peak_tflops=1.0",
         "data.num_samples=16", "model.options.hidden=32", "model.options.num_heads=2", "checkpoint.interval=0"]
WATCHED = ["validation.interval=2", "validation.samples=3", "validation.levels=4", "preview.interval=2",
           "preview.count=2", "preview.steps=3"]


def _train(config: Path, out: Path, *sets: str):
    items = [*SMALL, f"train.out_dir={out}", *sets]
    return CliRunner().invoke(app, ["train", str(config), *[a for s in items for a in ("--set", s)]])


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_tiny_run_logs_the_held_out_loss_and_writes_h264_previews_with_a_contact_sheet(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from vfm_infer.video.contact_sheet import read_png
    from vfm_infer.video.mp4 import read_mp4

    out = tmp_path / "run"
    result = _train(TINY, out, *WATCHED, "logging.interval=3")
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert [r["step"] for r in rows] == [2, 3, 4]  # logged every 3 steps, and at the watched steps 2 and 4
    watched = [r for r in rows if "val_loss" in r]
    assert [r["step"] for r in watched] == [2, 4] and all(r["preview_s"] > 0 and r["val_s"] > 0 for r in watched)
    for step in (2, 4):
        folder = out / "previews" / f"step_{step:08d}"
        videos = [read_mp4(folder / f"{i:04d}.mp4") for i in range(2)]  # class 0 and class 1
        assert all(v.shape == (2, 8, 8, 3) for v in videos)  # the training data's 2 frames of 8 x 8
        sheet = read_png(folder / "contact_sheet.png")
        assert sheet.shape == (2 * 64 + 2, 2 * 64 + 2, 3)  # a row per video, its 2 frames enlarged to 64 px
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("val/loss")] == [2, 4]
    assert [e.step for e in events.Scalars("preview/s")] == [2, 4]
    assert len(json.loads((out / "validation.json").read_text())["levels"]) == 4
    assert (out / "loss_curve.png").is_file()


TEXT_DIM = 16
LABELS = make_blobs(24, (3, 2, 8, 8), 4, seed=5)[1]


def _text_shards(folder: Path, *, val: bool) -> Path:
    """One bucket of captioned blobs, its last shards a `val` split part when ``val``."""
    from vfm_data import SampleMeta, ShardWriter, prepare_dataset

    encoder = vfm_models.get_text_encoder("hash")(dim=TEXT_DIM)
    latents, labels = make_blobs(24, (3, 2, 8, 8), 4, seed=5)
    with ShardWriter(folder, max_shard_bytes=20_000) as w:  # a few samples per shard
        for i in range(24):
            caption = f"blob {i} of class {int(labels[i])}"
            emb, _ = encoder.encode([caption])
            meta = SampleMeta(source="synthetic.mp4", span=(0, 1), fps=8, size=(8, 8), caption=caption, modality="video",
                              tokenizer="pixel", text_encoder="hash",
                              extra={"tokenizer_options": {"patch": 1}, "text_encoder_options": {"dim": TEXT_DIM}})
            w.write(f"k{i:03d}", latents[i], emb[0], meta)
    shards = [re.escape(p.name) for p in sorted(folder.glob("*.tar"))]
    parts = [("train", f"({'|'.join(shards[:-2])})$"), ("val", f"({'|'.join(shards[-2:])})$")] if val else [("train", r".*\.tar$")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        prepare_dataset(folder, split_parts=parts)
    return folder


def _text_config(tmp_path: Path, shards: Path) -> Path:
    config = tmp_path / "text.toml"
    config.write_text(f"""
[model]
family = "dit-cross"
preset = "tiny"
options = {{ hidden = 32, depth = 1, num_heads = 2, patch = [1, 2, 2] }}
[data]
source = "shards"
shards = ["{shards}"]
micro_batch = 2
[logging]
tensorboard = false
loss_curve = false
""")
    return config


def test_held_out_clips_come_from_the_shards_val_split_and_a_text_model_previews_their_captions(tmp_path):
    shards = _text_shards(tmp_path / "shards", val=True)
    out = tmp_path / "run"
    result = _train(_text_config(tmp_path, shards), out, *WATCHED, "data.num_samples=1")
    assert result.exit_code == 0, result.output
    assert [r["step"] for r in _rows(out) if "val_loss" in r] == [2, 4]
    assert json.loads((out / "validation.json").read_text())["clips"] == 3
    assert (out / "previews" / "step_00000004" / "0001.mp4").is_file()
    shown = json.loads((out / "previews" / "step_00000004" / "prompts.json").read_text())
    assert shown["prompts"] == [f"blob {i} of class {int(LABELS[i])}" for i in (18, 19)]  # the val split's first clips


def test_held_out_data_that_is_not_there_is_one_error_line_naming_the_key(tmp_path):
    missing = _train(TINY, tmp_path / "a", *WATCHED, f"validation.blend={tmp_path / 'nowhere'}")
    assert missing.exit_code == 1
    assert f"config key 'validation.blend': {tmp_path / 'nowhere'} does not exist" in missing.output
    assert "Traceback" not in missing.output
    shards = _text_shards(tmp_path / "shards", val=False)
    no_split = _train(_text_config(tmp_path, shards), tmp_path / "b", *WATCHED)
    assert no_split.exit_code == 1
    assert "config key 'validation.split'" in no_split.output and "has no split 'val'; it has 'train'" in no_split.output


def test_previews_take_captions_from_a_vfm_shard_folder_named_by_validation_blend_with_validation_off(tmp_path):
    from vfm_data import write_blend

    held_out = tmp_path / "held_out"  # laid out as `vfm shard` writes: a bucket folder and blend.yaml beside it
    _text_shards(held_out / "bucket", val=False)
    write_blend(held_out / "blend.yaml", [(held_out / "bucket", 1.0)])
    out = tmp_path / "run"
    train = _text_shards(tmp_path / "train", val=False)
    result = _train(_text_config(tmp_path, train), out, "preview.interval=2", "preview.count=2", "preview.steps=3",
                    f"validation.blend={held_out}", "validation.split=train")
    assert result.exit_code == 0, result.output
    shown = json.loads((out / "previews" / "step_00000004" / "prompts.json").read_text())
    assert shown["prompts"] == [f"blob {i} of class {int(LABELS[i])}" for i in (0, 1)]  # not the empty prompt


def test_a_preview_whose_prompts_cannot_be_read_warns_the_same_reason_every_time(tmp_path):
    broken = _text_shards(tmp_path / "broken", val=False)
    for tar in broken.glob("*.tar"):  # indexed, then overwritten: no sample (so no caption) can be read
        tar.write_bytes(b"\0" * tar.stat().st_size)
    train = _text_shards(tmp_path / "train", val=False)
    result = _train(_text_config(tmp_path, train), tmp_path / "run", "preview.interval=2", "preview.count=2",
                    "preview.steps=3", f"validation.blend={broken}", "validation.split=train")
    assert result.exit_code == 0, result.output
    said = re.findall(r"^warning: step \d+: the preview failed \((.*)\); training goes on$", result.output, re.M)
    assert len(said) == 2, result.output  # steps 2 and 4
    assert said[0].startswith("ShardError") and said[1] == said[0], said  # not a KeyError of the prompts


def test_a_preview_folder_holds_only_this_previews_files_not_an_interrupted_attempts(tmp_path):
    out = tmp_path / "run"
    folder = out / "previews" / "step_00000002"
    folder.mkdir(parents=True)
    # what an attempt at step 2 killed before a resume leaves: a third video (it had preview.count = 3), a
    # partial file, and a folder written aside that was never renamed
    for name in ("0002.mp4", ".0001.partial.k2x9q7ab.mp4"):
        (folder / name).write_bytes(b"from the interrupted attempt")
    aside = out / "previews" / ".step_00000002.writing-0123abcd" / "step_00000002"
    aside.mkdir(parents=True)
    (aside / "0000.mp4").write_bytes(b"from the interrupted attempt")
    result = _train(TINY, out, *WATCHED)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["0000.mp4", "0001.mp4", "contact_sheet.png", "prompts.json"]
    assert sorted(p.name for p in (out / "previews").iterdir()) == ["step_00000002", "step_00000004"]


def test_no_preview_pipeline_model_text_encoder_or_tokenizer_stays_alive_after_a_preview(tmp_path):
    import gc

    from vfm_cli.recipe import parts_builder, validate
    from vfm_infer.pipeline import VideoPipeline
    from vfm_parallel.trainer import apply_overrides, from_dict, train

    shards = _text_shards(tmp_path / "shards", val=True)
    data = tomllib.loads(_text_config(tmp_path, shards).read_text())
    cfg = from_dict(apply_overrides(data, [*SMALL, *WATCHED, "data.num_samples=1", f"train.out_dir={tmp_path / 'run'}"]))
    resolved = validate(cfg)
    build = parts_builder(resolved)
    kinds = (VideoPipeline, type(vfm_models.get_family("dit-cross").build(resolved.mcfg)),
             vfm_models.get_text_encoder("hash"), vfm_models.get_tokenizer("pixel"))

    def alive() -> list[int]:
        gc.unfreeze()  # something in the run freezes the collector: get_objects would leave those objects out
        gc.collect()
        objects = gc.get_objects()
        # by type: isinstance asks some objects (torch.distributed.reduce_op) for a deprecated __class__
        return [sum(issubclass(type(o), kind) for o in objects) for kind in kinds]

    counts: list[tuple[list[int], list[int]]] = []

    def observed(ctx):
        parts = build(ctx)
        preview = parts.preview

        def watched_preview(folder, weights, step):
            before = alive()
            files = preview(folder, weights, step)
            counts.append((before, alive()))
            return files

        parts.preview = watched_preview
        return parts

    train(cfg, observed)
    assert len(counts) == 2  # steps 2 and 4
    for before, after in counts:
        assert after == before, counts  # pipelines, models, text encoders, tokenizers: as many as before the preview
    assert counts[0][0][0] == 0 and counts[0][0][1] == 1  # no pipeline; the training model


def test_a_previews_folder_that_cannot_be_read_is_a_warning_per_preview_and_training_goes_on(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "previews").write_text("a file where the previews folder goes")  # neither listed nor written into
    result = _train(TINY, out, *WATCHED)
    assert result.exit_code == 0, result.output
    said = re.findall(r"^warning: step (\d+): the preview failed \((\w+)", result.output, re.M)
    assert said == [("2", "NotADirectoryError"), ("4", "NotADirectoryError")], result.output
    assert (out / "previews").read_text() == "a file where the previews folder goes"
