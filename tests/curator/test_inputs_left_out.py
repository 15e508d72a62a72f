"""What a folder input holds and a run does not take is named, never skipped without a word: a
subfolder the run cannot list (``not read: FOLDER: REASON``, the others curated), files not named
like videos and hidden ones (counted by extension); camera and phone extensions in any letter case
are taken. Real H264 files (PyAV), real runs."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys

import pytest

from vfm_curator.api import curate
from vfm_curator.io.inputs import LeftOut, expand
from vfm_curator.synth import make_video

SERIAL = {"run": {"runner": "serial"}}


def _without_read_override(scratch) -> list[str]:
    """The prefix that runs a command unable to list a mode-000 folder: none for a user without the
    capabilities that override it; for root, setpriv without them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH).
    Probed, not assumed: a mode-000 folder in ``scratch`` is listed under the prefix, and the test
    skips where that works (setpriv cannot drop them in the container, or a user holds them)."""
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    if drop and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no folder is unreadable to this test")
    probe = scratch / "mode-000-probe"
    probe.mkdir()
    probe.chmod(0)
    # the child says so only on PermissionError: setpriv failing to drop them exits 1 as a traceback does
    lister = "import os, sys\ntry:\n    os.listdir(sys.argv[1])\nexcept PermissionError:\n    print('denied')"
    try:
        listed = subprocess.run([*drop, sys.executable, "-c", lister, str(probe)], capture_output=True, text=True, timeout=60)
    finally:
        probe.chmod(0o755)
        probe.rmdir()
    if listed.stdout.strip() != "denied":
        pytest.skip(f"a mode-000 folder is not refused here{' under ' + ' '.join(drop) if drop else ''} "
                    f"({(listed.stderr.strip().splitlines() or ['listed'])[-1]}): no folder is unreadable to this test")
    return drop


def test_a_subfolder_the_run_cannot_list_is_named_with_its_reason_and_the_others_are_curated(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    make_video(src / "a.mp4", [24], seed=1)
    make_video(src / "locked" / "b.mp4", [24], seed=2)
    (src / "locked").chmod(0)
    try:
        result = subprocess.run([*_without_read_override(tmp_path), sys.executable, "-m", "vfm_cli", "curate", str(src), "-o", str(out),
                                 "--runner", "serial", "--no-progress"], capture_output=True, text=True, timeout=300)
    finally:
        (src / "locked").chmod(0o755)
    assert result.returncode == 0, result.stdout + result.stderr
    line = f"not read: {src / 'locked'}: Permission denied (its videos were not read)"
    assert line in result.stderr.splitlines(), result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["folders_not_read"] == {str(src / "locked"): "Permission denied"}
    assert (summary["videos"], summary["clips"], summary["failures"]) == (1, 1, 0)
    assert line + "." in html.unescape((out / "report.html").read_text())


def test_files_not_named_like_videos_and_hidden_ones_are_counted_by_extension_sidecars_not(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    make_video(src / "a.mp4", [24], seed=1)
    (src / "a.txt").write_text("a caption")  # a's sidecar caption: used, not left out
    (src / "notes.TXT").write_text("shot list")
    (src / "b.json").write_text("{}")
    (src / "sub" / "README").parent.mkdir()
    (src / "sub" / "README").write_text("")
    (src / ".DS_Store").write_bytes(b"\0")
    make_video(src / ".cache" / "old.mp4", [24], seed=2)  # a dot-folder counts once; its contents are not looked at
    left_out = LeftOut()
    assert [os.path.basename(s.path) for s in expand([str(src)], left_out=left_out)] == ["a.mp4"]
    assert (left_out.not_video, left_out.hidden, left_out.not_read) == ({".txt": 1, ".json": 1, "": 1}, 2, {})
    summary = curate(src, out, SERIAL)
    expected = ("3 files not named like a video ((no extension) 1, .json 1, .txt 1) and 2 hidden files or folders "
                "(names starting with '.'); name such a file as an input (or in a .jsonl/.csv manifest) to read it")
    assert summary.left_out == expected and summary.clips == 1
    assert json.loads((out / "summary.json").read_text())["left_out"] == expected
    assert f"left out: {expected}." in html.unescape((out / "report.html").read_text())


def test_a_file_named_like_a_sidecar_that_the_caption_stage_does_not_read_is_counted_as_left_out(tmp_path):
    """Only the names the caption stage reads (``a.txt``, ``a.mp4.json``...) go unnamed as sidecars:
    ``a.TXT`` is not read as a.mp4's caption (names are case-sensitive), so the run says it left it out."""
    src, out = tmp_path / "in", tmp_path / "out"
    make_video(src / "a.mp4", [24], seed=1)
    (src / "a.TXT").write_text("a caption in a file the caption stage does not read")
    (src / "a.mp4.json").write_text('{"caption": "a red square"}')
    left_out = LeftOut()
    expand([str(src)], left_out=left_out)
    assert left_out.not_video == {".txt": 1}
    summary = curate(src, out, SERIAL)
    import pyarrow.parquet as pq

    assert set(pq.read_table(out / "clips.parquet", columns=["caption"]).column("caption").to_pylist()) == {"a red square"}
    assert summary.left_out.startswith("1 file not named like a video (.txt 1)")


def test_an_output_folder_inside_the_input_folder_is_not_counted_as_left_out(tmp_path):
    make_video(tmp_path / "a.mp4", [24], seed=1)
    curate(tmp_path, tmp_path / "out", SERIAL)
    again = curate(tmp_path, tmp_path / "out", SERIAL)  # out/ now holds report.html, clips.parquet, .state/...
    assert again.left_out is None and again.skipped == 1


# (file name, container): H264 in what cameras, phones, recorders and old software write, names in upper case
CAMERA_FILES = [
    ("CLIP0001.MTS", "mpegts"), ("00001.M2TS", "mpegts"), ("REC.TS", "mpegts"), ("MOV_0001.MPG", "mpeg"),
    ("TAPE.MPEG", "mpeg"), ("VTS_01.M2P", "mpeg"), ("OLD.WMV", "asf"), ("WEB.FLV", "flv"), ("PHONE.3GP", "3gp"),
    ("IPOD.M4V", "ipod"), ("IMG_0001.MOV", "mov"), ("QUICKTIME.QT", "mov"), ("GH010001.MP4", "mp4"),
    ("CAM.AVI", "avi"), ("SCREEN.MKV", "matroska"), ("STUDIO.MXF", "mxf"),
]


def test_camera_and_phone_extensions_in_any_letter_case_are_taken_and_curated(tmp_path):
    from tests.curator import messy_inputs as messy

    src = tmp_path / "in"
    for seed, (name, fmt) in enumerate(CAMERA_FILES):
        messy.write(src / name, 30, fmt=fmt, seed=seed)  # other pictures each: no clip is a near-duplicate
    assert sorted(os.path.basename(s.path) for s in expand([str(src)])) == sorted(name for name, _ in CAMERA_FILES)
    summary = curate(src, tmp_path / "out", {**SERIAL, "options": {"split": {"min_clip_s": 0.5}}})
    assert (summary.videos, summary.failures, summary.duplicates, summary.left_out) == (len(CAMERA_FILES), 0, 0, None)
    import pyarrow.parquet as pq

    sources = pq.read_table(tmp_path / "out" / "clips.parquet", columns=["source"]).column("source").to_pylist()
    assert sorted({os.path.basename(s) for s in sources}) == sorted(name for name, _ in CAMERA_FILES)  # each gave clips
