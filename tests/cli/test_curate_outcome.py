"""``vfm curate`` says how the run went: one ``failures:`` line naming the kinds and failures.jsonl
when videos failed, and exit 1 with one ``error:`` line when the folder holds no clip (as ``vfm
shard`` does with no sample), so ``vfm curate ... && vfm shard ...`` stops there."""

from __future__ import annotations

from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.synth import make_video


def _curate(inputs, out):
    return CliRunner().invoke(app, ["curate", *map(str, inputs), "-o", str(out), "--runner", "serial", "--no-progress"])


def test_curate_names_the_failures_and_exits_0_when_clips_were_written(tmp_path):
    make_video(tmp_path / "in" / "good.mp4", [30, 30], seed=1)
    (tmp_path / "in" / "notes.mp4").write_text("a text file, not a video\n")
    result = _curate([tmp_path / "in"], tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert f"failures: 1 video failed (unusable-input 1): {tmp_path / 'out' / 'failures.jsonl'}" in result.output
    assert "error:" not in result.output


def test_curate_exits_1_with_one_line_when_every_video_failed(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "empty.mp4").write_bytes(b"")
    (tmp_path / "in" / "notes.mp4").write_text("a text file, not a video\n")
    make_video(tmp_path / "in" / "short.mp4", [7], seed=2)  # 0.3 s: under min_clip_s = 1.0
    out = tmp_path / "out"
    result = _curate([tmp_path / "in"], out)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: no clip written: all 3 videos failed (unusable-input 2, too-short 1); the most common "
                      f"reason: empty file (0 bytes); see {out / 'failures.jsonl'}"], result.output
    # a re-run skips them (same files, same options) and still says so
    again = _curate([tmp_path / "in"], out)
    assert again.exit_code == 1 and "error: no clip written: all 3 videos failed" in again.output, again.output


def test_curate_refuses_num_cpus_0_instead_of_ignoring_it(tmp_path):
    make_video(tmp_path / "in" / "good.mp4", [30], seed=1)
    for command in (["curate", str(tmp_path / "in")], ["shard", str(tmp_path / "out"), "--tokenizer", "pixel", "--text-encoder", "hash"]):
        result = CliRunner().invoke(app, [*command, "-o", str(tmp_path / "out"), "--num-cpus", "0", "--no-progress"])
        assert result.exit_code == 1, result.output
        assert result.output.strip() == "error: config [run] num_cpus = 0.0; accepted: a number > 0", result.output
    assert not (tmp_path / "out").exists()
