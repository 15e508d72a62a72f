"""Metrics of generated videos: the registry kind, and the demo's prompt-adherence metric on videos
whose answers are known (the demo's own synthetic clips, noise, the wrong prompt)."""

from __future__ import annotations

import numpy as np
import pytest

from vfm_infer.metrics import EvalItem, Metric
from vfm_infer.metrics.base import evaluate, load_metric, read_items
from vfm_infer.metrics.shapes import PALETTE, ShapesAdherence, largest_region, parse_prompt
from vfm_infer.plugins import host


def clip(colour="red", shape="circle", direction="right", background=(30, 130, 50), size=32, frames=8):
    """A 32x32 demo clip: the shape crossing the frame once, as the demo's shards hold it."""
    from vfm_curator.synth import shape_frames

    every = shape_frames(frames * 4, shape=shape, colour=colour, direction=direction, background=background,
                         width=size, height=size, size=size * 3 // 8)
    return np.stack(every[::4])


def test_shapes_is_a_registered_metric_and_an_unknown_one_lists_the_available():
    assert "shapes" in host.names("metrics")
    assert isinstance(load_metric("shapes"), Metric)
    with pytest.raises(KeyError, match="available: .*shapes"):
        load_metric("nope")


def test_the_palette_is_the_demos():
    from vfm_curator.synth import COLOURS, DIRECTIONS

    assert PALETTE == COLOURS
    assert set(DIRECTIONS) == {"right", "left", "down", "up"}


@pytest.mark.parametrize("colour", ["red", "green", "blue", "yellow"])
@pytest.mark.parametrize(("shape", "direction"), [("circle", "right"), ("square", "left"), ("circle", "down"), ("square", "up")])
def test_a_demo_clip_scores_correct_on_every_part(colour, shape, direction):
    row = ShapesAdherence().score(EvalItem(f"a {colour} {shape} moving {direction}", clip(colour, shape, direction)))
    assert row["flat"] and row["single_shape"], row
    assert row["colour"] == colour and row["colour_ok"]
    assert row["direction"] == direction and row["direction_ok"]
    assert row["background_rms"] < 1


def test_the_wrong_prompt_is_caught_part_by_part():
    frames = clip("blue", "square", "up")
    row = ShapesAdherence().score(EvalItem("a red square moving down", frames))
    assert row["colour_ok"] is False and row["direction_ok"] is False and row["shape_ok"] is True
    assert row["flat"]


def test_noise_is_neither_flat_nor_one_shape_and_a_still_shape_does_not_move():
    noise = np.random.default_rng(0).integers(0, 256, size=(8, 32, 32, 3), dtype=np.uint8)
    row = ShapesAdherence().score(EvalItem("a red circle moving right", noise))
    assert not row["flat"] and not row["single_shape"]
    still = np.repeat(clip()[:1], 8, axis=0)
    row = ShapesAdherence().score(EvalItem("a red circle moving right", still))
    assert row["direction"] is None and row["direction_ok"] is False and row["colour_ok"]


def test_two_shapes_are_not_one_shape():
    frames = clip().copy()
    frames[:, 25:30, 1:6] = (40, 190, 70)  # a green square in a corner of every frame
    assert not ShapesAdherence().score(EvalItem("a red circle moving right", frames))["single_shape"]


def test_a_prompt_that_is_not_a_demo_caption_is_reported_not_scored():
    result = ShapesAdherence().evaluate([EvalItem("a fox in the snow", clip()), EvalItem("a red circle moving right", clip())])
    assert [r["parsed"] for r in result.per_video] == [False, True]
    assert result.per_video[0]["colour_ok"] is None
    assert result.summary["videos"] == 2 and result.summary["scored"] == 1 and result.summary["all_correct"] == 1
    assert len(result.notes) == 1 and "1 of 2 prompts are not demo captions" in result.notes[0]
    assert "'a fox in the snow'" in result.notes[0] and "<circle|square>" in result.notes[0]


def test_a_row_not_scored_has_no_check_results_only_what_the_video_shows():
    row = ShapesAdherence().score(EvalItem("a fox in the snow", clip()))
    # None, as for colour_ok: not scored, which is not a failed check (vfm eval prints "-", not "NO")
    assert {k: row[k] for k in ("flat", "single_shape", "colour_ok", "direction_ok", "shape_ok")} == dict.fromkeys(
        ("flat", "single_shape", "colour_ok", "direction_ok", "shape_ok"))
    assert row["background_rms"] is not None and row["colour"] == "red"  # measured all the same


def test_helpers():
    assert parse_prompt("A Yellow square moving up.") == {"colour": "yellow", "shape": "square", "direction": "up"}
    assert parse_prompt("a cat") is None
    mask = np.zeros((5, 5), bool)
    mask[0, 0] = True
    mask[2:4, 2:5] = True
    assert largest_region(mask).sum() == 6 and not largest_region(mask)[0, 0]
    assert not largest_region(np.zeros((3, 3), bool)).any()


def test_read_items_pairs_videos_with_prompts_in_order(tmp_path):
    from vfm_infer.video.mp4 import write_mp4

    write_mp4(tmp_path / "0000.mp4", clip("red"))
    write_mp4(tmp_path / "0001.mp4", clip("blue", "square", "down"))
    items = read_items(tmp_path, ["a red circle moving right", "a blue square moving down"])
    scores = evaluate(items, {"shapes": {}})["shapes"]
    assert scores.summary["all_correct"] == 2, scores.per_video
    with pytest.raises(FileNotFoundError, match="0002.mp4"):
        read_items(tmp_path, ["a", "b", "c"])


def test_a_video_without_background_pixels_has_no_background_rms_rather_than_a_flat_zero():
    stripes = np.zeros((4, 16, 16, 3), np.uint8)
    stripes[:, :, ::2] = 255  # every pixel is far from the frame's median colour: all foreground
    result = ShapesAdherence().evaluate([EvalItem("a red circle moving right", stripes),
                                         EvalItem("a red circle moving right", clip())])
    first, second = result.per_video
    assert first["background_fraction"] == 0 and first["background_rms"] is None and not first["flat"]
    assert result.summary["mean_background_rms"] == second["background_rms"]  # the measured video alone
    only = ShapesAdherence().evaluate([EvalItem("a red circle moving right", stripes)])
    assert only.summary["mean_background_rms"] is None


def test_noise_matches_no_prompt_in_colour_motion_or_shape():
    # noise's largest blob has some colour, drift and fill: without a shape in most frames at under
    # 40% of the frame, none of them is evidence that the video follows its prompt
    noise = np.random.default_rng(0).integers(0, 256, size=(8, 32, 32, 3), dtype=np.uint8)
    metric = ShapesAdherence()
    for colour in PALETTE:
        for shape in ("circle", "square"):
            for direction in ("right", "left", "down", "up"):
                row = metric.score(EvalItem(f"a {colour} {shape} moving {direction}", noise))
                assert row["colour_ok"] is False and row["shape_ok"] is False and row["direction_ok"] is False, row
