"""`vfm generate` under torchrun (2 real gloo ranks) fails and stops the way one process does: a
request the layout cannot run is one `error:` line before any work (not one per rank, no output
folder), and a rank killed mid-run ends the other with one line, no traceback, every video left in
the folder whole and no partial file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_generate import make_export
from tests.parallel.test_orphan_ranks import alive, children, wait_for


def _torchrun(export: Path, out: Path, *extra: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "vfm_cli.main", "generate", "--checkpoint", str(export), "-o", str(out), *extra],
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True, **popen)


def _rank_lines(output: str) -> list[str]:
    """What vfm and the ranks printed: its `error:` / `interrupted` lines and any [rankN] traceback
    line, not torchrun's own log lines and failure summary."""
    return [line for line in output.splitlines() if line.startswith(("error:", "interrupted", "[rank"))]


def test_cfg_parallel_at_guidance_one_is_one_error_line_before_any_work(tmp_path):
    export = make_export(tmp_path / "export")
    proc = _torchrun(export, tmp_path / "out", "--prompt", "1", "--steps", "2", "--cfg-parallel", "--guidance", "1",
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    lines = _rank_lines(output)
    assert len(lines) == 1, output  # once, not once per rank
    assert lines[0].startswith("error: CFG-parallel runs the conditional and unconditional branches on two ranks, "
                               "but at guidance 1")
    assert not (tmp_path / "out").exists() and "video 1/1" not in output


@contextlib.contextmanager
def _generating(tmp_path: Path):
    """2 ranks generating 400 short videos, once 3 of them are written: yields (torchrun, its ranks'
    pids, the output folder, the log file); whatever is still alive afterwards is killed."""
    export = make_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(str(i % 4) for i in range(400)) + "\n")
    out, log = tmp_path / "out", tmp_path / "log.txt"
    with log.open("w") as fh:
        launcher = _torchrun(export, out, "--prompts", str(prompts), "--steps", "2", "--frames", "8",
                             stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        ranks: list[int] = []
        try:
            started = wait_for(lambda: len(list(out.glob("*.mp4"))) >= 3 or launcher.poll() is not None, 120, 0.1)
            assert started and launcher.poll() is None, f"no videos in 120 s: {log.read_text()[-2000:]}"
            ranks = sorted(children(launcher.pid))
            assert len(ranks) == 2
            yield launcher, ranks, out, log
        finally:
            for pid in [launcher.pid, *ranks]:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


def _assert_whole_videos_only(out: Path) -> list[Path]:
    from vfm_infer.video.mp4 import read_mp4

    videos = sorted(out.glob("*.mp4"))
    assert [p.name for p in out.iterdir() if p.name.startswith(".") and p.name != ".vfm-lock"] == []  # no partial file
    for video in videos:
        assert read_mp4(video).shape == (8, 16, 16, 3)
    return videos


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process parents from /proc (Linux)")
def test_a_rank_killed_mid_run_ends_the_other_with_one_line_and_only_whole_videos(tmp_path):
    with _generating(tmp_path) as (launcher, ranks, out, log):
        os.kill(ranks[1], signal.SIGKILL)
        t0 = time.monotonic()
        assert wait_for(lambda: launcher.poll() is not None, 15.0), "torchrun still running 15 s after a rank was killed"
        print(f"torchrun ended {time.monotonic() - t0:.2f} s after a rank was killed")
    output = log.read_text()
    lines = _rank_lines(output)
    assert len(lines) == 1, output[-3000:]
    # rank 0 meets the dead peer in its next collective; were it between collectives (writing a video)
    # when torchrun's SIGTERM comes, it stops on that instead: one line either way
    assert lines[0].startswith(("error: rank 0 lost contact with another rank of this job",
                                "interrupted by SIGTERM during video ")), lines
    videos = _assert_whole_videos_only(out)
    assert f"the {len(videos)} finished videos in {out} (0000.mp4 ... {videos[-1].name}) are whole" in lines[0]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process parents from /proc (Linux)")
def test_ctrl_c_stops_every_rank_with_one_line_from_rank_0_and_only_whole_videos(tmp_path):
    with _generating(tmp_path) as (launcher, ranks, out, log):
        launcher.send_signal(signal.SIGINT)  # Ctrl-C reaches torchrun, which passes it to its ranks
        assert wait_for(lambda: launcher.poll() is not None and not any(alive(r) for r in ranks), 15.0), \
            "torchrun or a rank still running 15 s after Ctrl-C"
    lines = _rank_lines(log.read_text())
    assert len(lines) == 1 and lines[0].startswith("interrupted by SIGINT during video "), lines
    videos = _assert_whole_videos_only(out)
    assert f"no partial video left; the {len(videos)} finished videos in {out}" in lines[0]


def test_what_a_killed_run_left_half_written_is_removed_by_the_next_run(tmp_path):
    from tests.cli.test_generate import invoke

    export = make_export(tmp_path / "export")
    out = tmp_path / "out"
    out.mkdir()
    # what write_mp4 / write_png leave when SIGKILL (no cleanup possible) ends them mid-write
    (out / ".0000.partial.k2x9q7ab.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom")
    (out / ".0007.partial.x_3mz0qa.png").write_bytes(b"\x89PNG")
    (out / ".0001.partial.mp4").write_bytes(b"\x00")  # the name earlier versions wrote
    (out / ".notes.partial.txt").write_text("the user's")  # not a name vfm writes: kept
    victim = tmp_path / "victim.mp4"
    victim.write_bytes(b"precious")
    (out / ".0002.partial.mp4").symlink_to(victim)  # a planted link: neither followed nor removed
    result = invoke("--checkpoint", export, "--prompt", "1", "--steps", "1", "-o", out)
    assert result.exit_code == 0, result.output
    assert victim.read_bytes() == b"precious"
    kept = [".0002.partial.mp4", ".notes.partial.txt"]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) in (kept, sorted([*kept, ".vfm-lock"]))
