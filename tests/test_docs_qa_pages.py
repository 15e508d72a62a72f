"""The pages in docs/ as a new user reads them: the commands and snippets a page prints run as printed
(on tiny inputs made here), and what a page says they give is what they give.

Real H264 videos (PyAV), the real clipping and sharding pipelines (serial runner, as the page's own
config picks), real energon shards, and the families' real tiny models."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import vfm_models
from vfm_cli.main import app
from vfm_curator.synth import make_video
from vfm_models.conditioning import describe

ROOT = Path(__file__).resolve().parents[1]


def page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def commands(block: str) -> list[list[str]]:
    """The commands of a bash block as a shell reads them: continuation lines joined, comments dropped."""
    return [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()
            if shlex.split(line, comments=True)]


# --- contracts.md, section 3: the export's null_condition ------------------------------------------


@pytest.mark.parametrize(("family", "kind"), [("dit", "class"), ("dit-cross", "text"), ("moviegen", "text"),
                                              ("stdit", "text"), ("wan", "text")])
def test_describe_of_a_model_is_its_null_condition_as_contracts_md_says(family, kind):
    """contracts.md: `null_condition` is `vfm_models.conditioning.describe` of the model's config or of
    the model itself. Given the model, describe read no `text_dim` / `num_classes` on the module and
    answered {"kind": "none"} for every family: an export written that way would tell guidance that
    no null condition was ever trained."""
    text = page("contracts.md")
    assert "`vfm_models.conditioning.describe`\nof the model's config (or of the model itself)" in text
    model = vfm_models.get_family(family).create("tiny")
    assert describe(model) == describe(model.config)
    assert describe(model)["kind"] == kind


# --- sharding.md: the first example, then "Looking at a sample" ---------------------------------------


def _run(*args: str):
    return CliRunner().invoke(app, [*args, "--runner", "serial", "--no-progress"])


def test_the_sharding_pages_commands_and_sample_snippet_run_as_printed(tmp_path, monkeypatch):
    """The page's `vfm curate` + `vfm shard` example on a 16:9 video with a sidecar caption writes the
    `144x256x17` bucket its sample snippet opens, and the snippet reads the shape its comment states; on footage
    without captions (the usual raw footage) the same commands exit 1, and the page says so beside
    the example and names `--no-require-captions` (it did not: a reader following it got exit 1)."""
    text = page("sharding.md")
    example = commands(blocks(text, "bash")[0])
    assert [c[:2] for c in example] == [["vfm", "curate"], ["vfm", "shard"]]
    intro = text[: text.index("## Which bucket")]
    assert "--no-require-captions" in intro and "no-caption" in intro, "the example's page hides that shard needs captions"

    monkeypatch.chdir(tmp_path)
    make_video(tmp_path / "raw" / "wide.mp4", [24, 24], width=320, height=180)  # 16:9: the 144x256 bucket
    (tmp_path / "raw" / "wide.txt").write_text("a shape crossing the frame")
    for command in example:
        result = _run(*command[1:])
        assert result.exit_code == 0, f"{shlex.join(command)}:\n{result.output}"
    assert (tmp_path / "shards" / "144x256x17" / "shard-000000.tar").is_file()

    snippet = tmp_path / "snippet.py"
    snippet.write_text(blocks(text, "python")[0] + "print(tuple(latent.shape), sorted(meta['extra']))\n")
    ran = subprocess.run([sys.executable, str(snippet)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    stated = re.search(r"# \((3, 17, 144, 256)\)", blocks(text, "python")[0]).group(1)
    shape, extra = ran.stdout.strip().splitlines()[-1].split(") ", 1)
    assert shape + ")" == f"({stated})" and "upscale" in extra and "crop" in extra
    assert (tmp_path / "first_frame.png").is_file()

    # the same footage without a caption: exit 1, one error line, as the page now says beside the example
    (tmp_path / "raw" / "wide.txt").unlink()
    renamed = [[w.replace("clips", "clips-bare").replace("shards", "shards-bare") for w in c] for c in example]
    assert _run(*renamed[0][1:]).exit_code == 0
    result = _run(*renamed[1][1:])
    assert result.exit_code == 1 and "error: no sample written" in result.output and "no-caption" in result.output


# --- shot-detection.md: gradual transitions ----------------------------------------------------------


def test_a_synth_crossfade_gives_the_clips_shot_detection_md_states(tmp_path):
    """The page said `adaptive` cuts where a 1 s crossfade starts; on a linear crossfade between two
    synthetic shots each frame changes by about 2, under `min_content_val`, and neither detector cuts
    there. The page now says which footage gives which clips; this checks the synthetic case."""
    import numpy as np

    from vfm_curator.stages.decode import DecodeStage
    from vfm_curator.stages.split import SplitStage
    from vfm_curator.synth import shot_frames, write_video
    from vfm_curator.tasks import VideoTask

    stated = re.search(r"so there both detectors give ((?:\[\d+, \d+\)(?:, )?)+)", page("shot-detection.md").replace("\n", " "))
    assert stated, "shot-detection.md no longer states the clips of a synthetic crossfade"
    expected = [tuple(map(int, m)) for m in re.findall(r"\[(\d+), (\d+)\)", stated.group(1))]
    rng = np.random.default_rng(0)
    a, b, c, d = (list(shot_frames(n, 320, 180, rng)) for n in (36, 36, 60, 60))
    ramp = (np.arange(24) + 1) / 25  # 24 mixed frames: 108-131
    frames = a + b + c[:36] + [(c[36 + i] * (1 - r) + d[i] * r).astype(np.uint8) for i, r in enumerate(ramp)] + d[24:]
    write_video(tmp_path / "fade.mp4", frames, fps=24)
    for method in ("content", "adaptive"):
        task = VideoTask(str(tmp_path / "fade.mp4"))
        DecodeStage().process([task])
        SplitStage(method=method, min_clip_s=0.5).process([task])
        assert [(clip.start, clip.end) for clip in task.clips] == expected, method


# --- decoders.md: the old hwaccel option ---------------------------------------------------------------


def test_the_old_hwaccel_option_decodes_and_vfm_curate_says_it_is_deprecated(tmp_path):
    """decoders.md: `hwaccel = "cuda"` still works and warns that it is deprecated in favour of
    `decoder = "pyav-cuda"`. The warning was a DeprecationWarning raised while decoding, which Python's
    default filters hide (in the driver and in Ray workers alike): `vfm curate` never showed it."""
    assert 'it warns that it is deprecated in favour of `decoder = "pyav-cuda"`' in page("decoders.md").replace("\n", " ")
    make_video(tmp_path / "raw" / "a.mp4", [30, 30], width=96, height=64)
    (tmp_path / "hw.toml").write_text('[options.decode]\nhwaccel = "cuda"\n')
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "raw"), "-o", str(tmp_path / "out"), "--config",
                                      str(tmp_path / "hw.toml"), "--runner", "serial", "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "hwaccel is deprecated" in line]
    assert lines == ["warning: stage 'decode': option hwaccel is deprecated; use decoder = 'pyav-cuda' (NVDEC "
                     "through PyAV) or decoder = 'auto'"], result.output


# --- plan.md: GPU counts that are not whole nodes -------------------------------------------------------


def test_plan_md_names_the_nodes_of_values_vfm_plan_offers_for_12_gpus():
    """plan.md: `--gpus 12` on nodes of 8 is refused, naming the `--nodes-of` values that work. The page
    named 4 and 6; the error offers every divisor of 12 from 3 to 8 (3, 4, 6)."""
    text = page("plan.md").replace("\n", " ")
    named = re.search(r"`--gpus 12` on nodes of 8 is refused, .*? \(`--nodes-of ([^)]*)\)", text).group(1)
    result = CliRunner().invoke(app, ["plan", str(ROOT / "configs" / "dit-7b.toml"), "--gpus", "12"])
    assert result.exit_code != 0
    offered = re.search(r"such as ([\d, ]+)\)", " ".join(result.output.split())).group(1)
    assert re.findall(r"\d+", named) == re.findall(r"\d+", offered), (named, offered)


# --- captioning.md: captions added after curation ------------------------------------------------------


def test_a_sidecar_caption_added_after_curation_reaches_the_same_folder_with_redo_changed(tmp_path):
    """captioning.md said finished videos are never redone, so captions added later needed a new output
    folder; `vfm curate` itself says to run again with --redo-changed, which clips a video whose caption
    changed again into the same folder. The page now says so; this checks it does."""
    import pyarrow.parquet as pq

    text = " ".join(page("captioning.md").split())
    assert "run `vfm curate` into the same folder again with `--redo-changed`" in text
    make_video(tmp_path / "raw" / "a.mp4", [30, 30], width=96, height=64)
    args = ["curate", str(tmp_path / "raw"), "-o", str(tmp_path / "out"), "--runner", "serial", "--no-progress"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0 and "--redo-changed" in " ".join(first.output.split()), first.output
    (tmp_path / "raw" / "a.txt").write_text("a shape crossing the frame")
    assert CliRunner().invoke(app, args).exit_code == 0  # without the flag: named, kept as it was
    assert set(pq.read_table(tmp_path / "out" / "clips.parquet").column("caption").to_pylist()) == {None}
    assert CliRunner().invoke(app, [*args, "--redo-changed"]).exit_code == 0
    assert set(pq.read_table(tmp_path / "out" / "clips.parquet").column("caption").to_pylist()) == {"a shape crossing the frame"}
