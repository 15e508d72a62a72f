"""``vfm generate --resume`` under torchrun (2 real gloo ranks, CFG-parallel): rank 0 alone reads the output
folder's record, and every rank skips the videos it keeps (a rank that sampled a kept video alone would wait
for its peer in a collective)."""

from __future__ import annotations

import subprocess

from tests.cli.test_generate import invoke, make_export
from tests.cli.test_generate_torchrun_stops import _torchrun


def test_resume_under_torchrun_keeps_the_finished_videos_on_every_rank(tmp_path):
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    result = invoke("--checkpoint", export, "--prompt", "1", "--prompt", "2", "--steps", "2", "--guidance", "2",
                    "-o", out)
    assert result.exit_code == 0, result.output
    first = (out / "0000.mp4").stat().st_mtime_ns
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n2\n3\n")
    proc = _torchrun(export, out, "--prompts", str(prompts), "--steps", "2", "--guidance", "2", "--cfg-parallel",
                     "--resume", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, output
    assert f"resuming: 2 videos of this request already in {out} kept (0000.mp4 ... 0001.mp4); generating the other 1" \
        in output
    assert "video 3/3" in output and "video 1/3" not in output
    assert (out / "0000.mp4").stat().st_mtime_ns == first
    assert sorted(p.name for p in out.glob("*.mp4")) == ["0000.mp4", "0001.mp4", "0002.mp4"]


def test_resume_of_another_request_under_torchrun_is_one_error_line(tmp_path):
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    assert invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "--guidance", "2", "-o", out).exit_code == 0
    proc = _torchrun(export, out, "--prompt", "1", "--steps", "3", "--guidance", "2", "--cfg-parallel", "--resume",
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, output
    lines = [line for line in output.splitlines() if line.startswith(("error:", "[rank"))]
    assert lines == [f"error: --resume: the videos in {out} were generated with steps 2 (this run: 3); give the same "
                     "options to resume them, or leave out --resume to replace them"], output
