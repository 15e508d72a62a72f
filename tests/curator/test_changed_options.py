"""Re-running ``vfm curate`` into a folder with other stage options skips the videos that finished
(resume) but says so: how many, from which stage the options differ, and that a new output folder
applies them (it skipped them silently: --shot-detector adaptive on a finished folder did nothing)."""

from __future__ import annotations

from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.synth import make_video


def test_a_rerun_with_other_options_names_the_videos_it_kept_as_they_were(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    base = ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--runner", "serial", "--no-progress"]
    runner = CliRunner()
    first = runner.invoke(app, base)
    assert first.exit_code == 0 and "options changed" not in first.output, first.output
    same = runner.invoke(app, base)  # the same options: a plain resume, no notice
    assert same.exit_code == 0 and "options changed" not in same.output, same.output
    other = runner.invoke(app, [*base, "--shot-detector", "adaptive"])
    assert other.exit_code == 0, other.output
    assert ("options changed: 2 videos finished before with other options (changed from stage split on) were skipped "
            "and kept as they were; to apply the new options, re-run with --redo-changed (their clips are replaced) or curate "
            "into a new output folder") in other.output
    fresh = runner.invoke(app, [*base[:3], str(tmp_path / "out2"), *base[4:], "--shot-detector", "adaptive"])
    assert fresh.exit_code == 0 and "options changed" not in fresh.output, fresh.output
