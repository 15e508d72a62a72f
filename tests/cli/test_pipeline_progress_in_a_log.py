"""``vfm curate`` / ``vfm shard`` with their output going to a file (a batch job's log), not a
terminal: rich draws its bars only when the run ends there, so the commands print plain progress
lines as the run goes."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.synth import make_video


def _progress_lines(output: str, total: int) -> list[str]:
    return [line for line in output.splitlines() if re.search(rf"\b\d+/{total}\b", line)]


def test_curate_into_a_log_prints_progress_lines_while_videos_finish(tmp_path):
    for k in range(4):
        make_video(tmp_path / "in" / f"v{k}.mp4", [30], seed=k)
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--runner", "serial"])
    assert result.exit_code == 0, result.output
    lines = _progress_lines(result.output, 4)
    # the first video through the last stage is reported before the others finish, not only at the end
    assert any(re.search(r"\bwrite 1/4 \(25%\)$", line) for line in lines), result.output
    assert re.search(r"^\d+:\d\d:\d\d decode\.\.write 4/4 \(100%\)$", lines[-1]), lines
    assert not re.search(r"^\s*write ━", result.output, re.M)  # no bars drawn into the file at the end


def test_shard_into_a_log_prints_progress_lines_while_clips_finish(tmp_path):
    for k in range(3):
        make_video(tmp_path / "in" / f"v{k}.mp4", [30], seed=k)
    curated = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "clips"), "--runner", "serial",
                                       "--no-progress"])
    assert curated.exit_code == 0, curated.output
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "clips"), "-o", str(tmp_path / "shards"), "--tokenizer", "pixel",
                                      "--text-encoder", "hash", "--runner", "serial", "--no-require-captions",
                                      "--resolution", "32x32", "--frames", "8"])
    assert result.exit_code == 0, result.output
    lines = _progress_lines(result.output, 3)
    assert len(lines) >= 2 and re.search(r"\b[12]/3 \(\d+%\)$", lines[0]), result.output
    assert lines[-1].endswith(" 3/3 (100%)"), lines


def test_stage_progress_in_a_log_prints_a_line_each_interval_naming_stages_with_their_own_counts():
    """Between tenths, a line comes when ``every_s`` has passed; stages at different counts are
    named apart (a stage pinned to its own workers runs ahead of the rest)."""
    import io

    from rich.console import Console

    from vfm_cli.pipeline_cli import StageProgress

    progress = StageProgress(every_s=0.0)
    buffer = io.StringIO()
    progress.progress.live.console = Console(file=buffer, force_terminal=False, width=40)
    progress.start(["decode", "split", "write"], total=1000)
    progress.advance("decode", 3)
    progress.advance("split", 3)
    progress.stop()
    lines = buffer.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "decode 3/1000, split..write 0/1000 (0%)",
        "decode..split 3/1000, write 0/1000 (0%)",
    ]  # one line each (not folded at the console's 40 columns), and stop() adds none: nothing moved since
