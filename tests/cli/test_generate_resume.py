"""``vfm generate --resume``: a batch stopped by Ctrl-C continues where it stopped, keeping the videos it
finished (``OUT/generate.json`` records the request and them); a rerun without it generated every video
again, and the output numbering always starts at 0000, so there was no way to generate only the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.cli.test_generate import invoke, make_export


def _read(path):
    from vfm_infer.video.mp4 import read_mp4

    return read_mp4(path)


def test_resume_keeps_the_finished_videos_and_generates_the_others_as_one_run_does(tmp_path):
    import numpy as np

    export = make_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n2\n3\n")
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert invoke("--checkpoint", export, "--prompts", prompts, "--steps", "2", "-o", whole).exit_code == 0
    # a run that finished the first two prompts (as one stopped during the third leaves it)
    result = invoke("--checkpoint", export, "--prompt", "1", "--prompt", "2", "--steps", "2", "-o", part)
    assert result.exit_code == 0, result.output
    first = (part / "0000.mp4").stat().st_mtime_ns
    result = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "2", "-o", part, "--resume")
    assert result.exit_code == 0, result.output
    assert f"resuming: 2 videos of this request already in {part} kept (0000.mp4 ... 0001.mp4); generating the other 1" \
        in result.output
    assert "video 3/3" in result.output and "video 1/3" not in result.output
    assert (part / "0000.mp4").stat().st_mtime_ns == first  # kept, not written again
    for i in range(3):
        assert np.array_equal(_read(part / f"{i:04d}.mp4"), _read(whole / f"{i:04d}.mp4"))
    assert str(part / "0002.mp4") in result.output and str(part / "0000.mp4") in result.output  # every video listed
    record = json.loads((part / "generate.json").read_text())
    assert record["request"]["steps"] == 2 and sorted(record["videos"]) == ["0000", "0001", "0002"]
    assert record["videos"]["0002"]["prompt"] == "3"


def test_resume_generates_again_a_video_changed_since_and_one_of_another_prompt(tmp_path):
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    assert invoke("--checkpoint", export, "--prompt", "1", "--prompt", "2", "--steps", "2", "-o", out).exit_code == 0
    (out / "0000.png").write_bytes(b"edited")
    result = invoke("--checkpoint", export, "--prompt", "1", "--prompt", "3", "--steps", "2", "-o", out, "--resume")
    assert result.exit_code == 0, result.output
    assert "resuming: 0 videos of this request already in" in result.output
    assert "video 1/2" in result.output and "video 2/2" in result.output


def test_resume_of_another_request_is_refused_naming_what_differs(tmp_path):
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    assert invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out).exit_code == 0
    before = (out / "0000.mp4").read_bytes()
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "3", "--seed", "5", "-o", out, "--resume")
    assert result.exit_code == 1
    assert result.output.strip() == (f"error: --resume: the videos in {out} were generated with steps 2 (this run: 3); "
                                     "seed 0 (this run: 5); give the same options to resume them, or leave out --resume "
                                     "to replace them")
    assert (out / "0000.mp4").read_bytes() == before
    result = invoke("--checkpoint", export, "--prompt", "1", "-o", tmp_path / "other", "--resume")
    assert result.exit_code == 1 and f"{tmp_path / 'other'} holds no generate.json" in result.output


def test_ctrl_c_names_resume_and_resuming_finishes_the_batch(tmp_path):
    export = make_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    lines = [f"{i % 4}\n" for i in range(400)]  # classes 0..3; more than a fast machine ends before the signal
    prompts.write_text("".join(lines))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "vfm_cli.main", "generate", "--checkpoint", str(export), "--prompts", str(prompts),
            "--steps", "2", "-o", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "0001.png").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("interrupted by SIGINT") and line.endswith("to generate the others, run the same command "
                                                                      "with --resume"), line
    done = sorted(p.name for p in out.glob("*.mp4"))
    assert done == [f"{i:04d}.mp4" for i in range(len(done))] and 2 <= len(done) < len(lines)
    # the same request, its prompts up to one past the stop (prompts are compared one by one: a prefix resumes too)
    # a signal between a video's files and its record entry leaves that video unrecorded: it is made again
    kept = len(json.loads((out / "generate.json").read_text())["videos"])
    assert len(done) - 1 <= kept <= len(done)
    prompts.write_text("".join(lines[:len(done) + 1]))
    result = invoke("--checkpoint", export, "--prompts", prompts, "--steps", "2", "-o", out, "--resume")
    assert result.exit_code == 0, result.output
    assert f"resuming: {kept} video{'s' if kept > 1 else ''} of this request already in {out} kept" in result.output
    assert f"generating the other {len(done) + 1 - kept}" in result.output
    assert sorted(p.name for p in out.glob("*.mp4")) == [f"{i:04d}.mp4" for i in range(len(done) + 1)]


def test_resume_into_a_folder_inside_the_export_keeps_its_videos(tmp_path):
    """The export's files identify the weights; the videos written inside it (``-o EXPORT/videos``) are not
    among them, or every run would find "the checkpoint's files changed" and refuse to resume."""
    export = make_export(tmp_path / "export")
    out = export / "videos"
    assert invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out).exit_code == 0
    result = invoke("--checkpoint", export, "--prompt", "1", "--prompt", "2", "--steps", "2", "-o", out, "--resume")
    assert result.exit_code == 0, result.output
    assert "resuming: 1 video of this request already in" in result.output


def test_a_record_that_is_a_pipe_a_link_a_list_or_nested_too_deep_is_refused_naming_it_never_waited_on(tmp_path):
    """``generate.json`` is a file of a folder that may come from elsewhere: read as vfm wrote it or refused in one
    line (a list or a "videos" list was a traceback; a named pipe waited for a writer forever)."""
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    assert invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out).exit_code == 0
    record = out / "generate.json"
    good = json.loads(record.read_text())
    cases = {
        "[]": 'not a record of vfm generate (accepted: an object with a "request" and a "videos" object)',
        json.dumps({**good, "videos": []}): 'not a record of vfm generate',
        "[" * 100_000 + "]" * 100_000: "nested 100000 levels deep",
    }
    for text, says in cases.items():
        record.unlink()
        record.write_text(text)
        result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out, "--resume")
        assert result.exit_code == 1 and says in result.output and "Traceback" not in result.output, result.output
        assert f"--resume: {record} cannot be read" in result.output
    record.unlink()
    os.mkfifo(record)
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out, "--resume")
    assert result.exit_code == 1 and "it is not a regular file (a named pipe, device or socket)" in result.output
    record.unlink()
    (tmp_path / "elsewhere.json").write_text(json.dumps(good))
    record.symlink_to(tmp_path / "elsewhere.json")
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out, "--resume")
    assert result.exit_code == 1 and "it is a symbolic link" in result.output


def test_the_temporary_record_a_killed_run_left_is_removed_by_the_next_run(tmp_path):
    """A SIGKILL between writing ``generate.json``'s new text and renaming it over the old leaves
    ``.generate.json.<random>.tmp``; the next run into the folder removes it (a link under that name is left)."""
    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    assert invoke("--checkpoint", export, "--prompt", "1", "--steps", "2", "-o", out).exit_code == 0
    (out / ".generate.json.k2x9q7ab.tmp").write_text('{"request": ')
    (out / ".generate.json.linked00.tmp").symlink_to(tmp_path / "elsewhere")
    result = invoke("--checkpoint", export, "--prompt", "1", "--prompt", "2", "--steps", "2", "-o", out, "--resume")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob(".generate.json.*")) == [".generate.json.linked00.tmp"]
