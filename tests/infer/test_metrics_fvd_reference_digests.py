"""``fvd``'s reference cache reads no reference video on a hit: each video's sha256 is remembered by its stat
(device, inode, size, mtime, ctime), so only a video changed in any way is read again. The opens are observed
by the kernel (inotify on the reference folders), not by replacing the code that reads."""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.infer.metric_models import tiny_i3d_weights, write_videos
from tests.infer.test_metrics_fvd import _items, another_video_in_place_of, reference_and_generated
from vfm_infer.metrics.file_digests import RACY_NS, DigestCacheWarning
from vfm_infer.metrics.fvd import FrechetVideoDistance, SmallSampleWarning
from vfm_infer.metrics.fvd_reference import digests_path

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify observes the opens")

IN_OPEN, IN_ISDIR = 0x20, 0x40000000


class Opens:
    """The files opened in some folders, as the kernel reports them (inotify IN_OPEN)."""

    def __init__(self, *folders: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        self.folders = {}
        for folder in folders:
            wd = self.libc.inotify_add_watch(self.fd, str(folder).encode(), IN_OPEN)
            assert wd >= 0, os.strerror(ctypes.get_errno())
            self.folders[wd] = folder

    def taken(self) -> list[str]:
        """The files opened since the last call (paths relative to the first folder), in order."""
        names, root = [], next(iter(self.folders.values()))
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return names
            at = 0
            while at < len(data):
                wd, mask, _, length = struct.unpack_from("iIII", data, at)
                name = data[at + 16:at + 16 + length].rstrip(b"\0").decode()
                at += 16 + length
                if name and not mask & IN_ISDIR:
                    names.append(str((self.folders[wd] / name).relative_to(root)))

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def aged(tmp_path):
    """Reference videos (one in a sub-folder) changed more than RACY_NS ago, so that their digests are trusted."""
    reference, generated, options = reference_and_generated(tmp_path)
    _age(reference)
    opens = Opens(reference, reference / "more")
    yield tmp_path, reference, _items(generated), options, opens
    opens.close()


def _age(reference: Path) -> None:
    newest = max(p.stat().st_ctime_ns for p in reference.rglob("*.mp4"))
    time.sleep(max(0.0, (newest + RACY_NS - time.time_ns()) / 1e9 + 0.05))


def _run(options, items):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        return FrechetVideoDistance(**options).evaluate(items)


VIDEOS = ["a.mp4", "b.mp4", "c.mp4", "more/d.mp4"]


def test_a_reference_cache_hit_opens_no_reference_video(aged):
    tmp_path, reference, items, options, opens = aged
    first = _run(options, items)
    assert "computed and cached" in first.notes[0]
    assert set(opens.taken()) == set(VIDEOS)  # the kernel sees the opens: read for their digests and frames
    second = _run(options, items)
    assert "read from the cache" in second.notes[0]
    assert opens.taken() == []  # no video byte read to find the key
    assert second.summary["fvd"] == first.summary["fvd"]


def test_a_video_rewritten_with_its_size_and_mtime_restored_is_read_again_and_is_a_miss(aged):
    tmp_path, reference, items, options, opens = aged
    first = _run(options, items)
    # only the ctime, which no one but the kernel sets, tells it changed
    replaced = reference / "b.mp4"
    before = another_video_in_place_of(replaced, tmp_path / "other")
    after = replaced.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    opens.taken()  # the first run's opens and this test's own
    second = _run(options, items)
    assert "computed and cached" in second.notes[0]
    assert second.summary["fvd"] != pytest.approx(first.summary["fvd"], rel=1e-3)
    # b.mp4 read for its digest and its frames; the others for their frames only (the statistics are of all)
    taken = opens.taken()
    assert taken.count("b.mp4") == 2 and all(taken.count(v) == 1 for v in VIDEOS if v != "b.mp4")


def test_a_digest_taken_soon_after_its_file_changed_is_not_trusted(tmp_path):
    # a file changed within the timestamp tick of its stat could change again with the same ctime (coarse clocks)
    reference = tmp_path / "real"
    write_videos(reference, [10, 11], frames=24, names=["a.mp4", "b.mp4"])
    options = dict(reference=str(reference), weights=str(tiny_i3d_weights(tmp_path / "i3d.safetensors", width=16)),
                   size=64, cache_dir=str(tmp_path / "cache"), device="cpu")
    write_videos(tmp_path / "videos", [20, 21])
    items = _items(tmp_path / "videos")
    for video in reference.iterdir():  # changed (a new ctime) just before the run: the setup above can take RACY_NS
        os.utime(video)
    _run(options, items)
    entries = json.loads(digests_path(Path(options["cache_dir"]), reference).read_text())["files"].values()
    assert all(e["checked_ns"] - e["ctime_ns"] < RACY_NS for e in entries), "the digests were taken too late to be racy"
    opens = Opens(reference)
    try:
        assert "read from the cache" in _run(options, items).notes[0]
        assert sorted(opens.taken()) == ["a.mp4", "b.mp4"]  # read for their digests again, not for frames
    finally:
        opens.close()


def test_a_corrupt_digests_file_is_one_warning_and_is_rebuilt(aged):
    tmp_path, reference, items, options, opens = aged
    _run(options, items)
    path = digests_path(Path(options["cache_dir"]), reference)
    assert json.loads(path.read_text())["version"] == 1
    for corrupt in ('{"version": 1, "files": {"a.mp4": {"sha256": 3}}}', "{not json", "\xff"):
        path.write_text(corrupt, encoding="latin-1")
        opens.taken()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert "read from the cache" in _run(options, items).notes[0]
        said = [str(w.message) for w in caught if issubclass(w.category, DigestCacheWarning)]
        assert len(said) == 1 and str(path) in said[0] and "rebuilt" in said[0]
        assert sorted(opens.taken()) == sorted(VIDEOS)  # each read once more for its digest
        assert "read from the cache" in _run(options, items).notes[0]  # rebuilt: no warning, no video read
        assert opens.taken() == []
