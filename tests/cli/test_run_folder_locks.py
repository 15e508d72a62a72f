"""One run per output folder: while another process owns the folder, ``vfm train``, ``vfm generate``,
``vfm curate`` and ``vfm shard`` into it exit 1 with one line naming the holder, and touch nothing
(before, two runs wrote the same files; a starting curate run deleted a live run's temporary files)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_plugins import LOCK_NAME

ROOT = Path(__file__).resolve().parents[2]
HOLD = textwrap.dedent("""
    import sys, time
    from vfm_plugins import FolderLock
    FolderLock(sys.argv[1], command="vfm first --run").acquire()
    print("held", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def held(tmp_path):
    """An output folder that a live process (the "first run") owns; yields (folder, pid)."""
    folder = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield folder, proc.pid
    proc.kill()
    proc.wait()
    proc.stdout.close()


def refused(result, pid: int, folder: Path) -> None:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if "error" in line]
    assert len(lines) == 1, result.output
    assert f"{folder} is in use by another run: pid {pid} on host" in lines[0]
    assert "command 'vfm first --run'" in lines[0] and LOCK_NAME in lines[0]


def test_a_second_vfm_train_into_a_held_run_folder_is_refused_and_writes_nothing(held):
    folder, pid = held
    result = CliRunner().invoke(app, ["train", str(ROOT / "configs" / "tiny.toml"), "--set", f"train.out_dir={folder}",
                                      "--set", "logging.progress=false", "--set", "logging.tensorboard=false"])
    refused(result, pid, folder)
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]  # no metrics, no checkpoints


def test_vfm_generate_into_a_held_folder_is_refused_before_sampling(held, tmp_path):
    from tests.cli.test_generate import make_export

    folder, pid = held
    export = make_export(tmp_path / "export")
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(export), "--prompt", "2", "--steps", "2",
                                      "--frames", "5", "--size", "16x24", "-o", str(folder)])
    refused(result, pid, folder)
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]


def test_vfm_curate_into_a_held_folder_is_refused_and_leaves_the_live_runs_temporary_files(held, tmp_path):
    from vfm_curator.synth import make_video

    folder, pid = held
    make_video(tmp_path / "in" / "a.mp4", [10], width=32, height=32, seed=1)
    live_tmp = folder / "clips" / ".a_0000.mp4.123.tmp"  # a file the first run is writing
    live_tmp.parent.mkdir(parents=True)
    live_tmp.write_bytes(b"half a clip")
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(folder), "--runner", "serial", "--no-progress"])
    refused(result, pid, folder)
    assert live_tmp.read_bytes() == b"half a clip"
    assert not (folder / "clips.parquet").exists() and not (folder / ".state").exists()


def test_vfm_shard_into_a_held_folder_is_refused(held, tmp_path):
    folder, pid = held
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "clips"), "-o", str(folder), "--tokenizer", "pixel",
                                      "--text-encoder", "hash", "--runner", "serial", "--no-progress"])
    refused(result, pid, folder)
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]


def test_a_finished_run_gives_the_folder_back(tmp_path):
    from vfm_plugins import FolderLock

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "no-clips"), "-o", str(out), "--tokenizer", "pixel",
                                      "--text-encoder", "hash", "--runner", "serial", "--no-progress"])
    assert result.exit_code == 1 and "in use" not in result.output  # failed for its own reason
    assert not out.exists()  # the folder it made for the lock is gone again: it wrote nothing
    with FolderLock(out):  # and nothing holds it
        pass
