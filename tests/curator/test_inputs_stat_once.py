"""``vfm curate FOLDER``: expanding a folder costs per-folder system calls, not several per file. A file
was stat'ed by the walk, its path resolved link by link (``realpath``: an lstat per path component) to tell
whether it lies in the output folder, and stat'ed again to tell which file it is: on NFS with millions of
files each of those is a round trip. The listing's own per-file information (``scandir``) is used instead;
only a link is resolved. Real files and links."""

from __future__ import annotations

import os

from vfm_curator.io.inputs import expand

FILES = 60


def _count(monkeypatch) -> dict[str, int]:
    """Calls of os.stat and os.lstat (what Path.stat, Path.is_symlink and os.path.realpath call)."""
    calls = {"stat": 0, "lstat": 0}
    for name in calls:
        real = getattr(os, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, counted)
    return calls


def _videos(root, first: int, last: int) -> None:
    for n in range(first, last):
        sub = root / ("a" if n % 2 else "b")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"v{n:03d}.mp4").write_bytes(b"")


def test_expanding_a_folder_makes_no_more_system_calls_for_more_files(tmp_path, monkeypatch):
    root = tmp_path / "deep" / "path" / "to" / "videos"  # realpath pays one lstat per component
    _videos(root, 0, FILES)
    (root / "link.mp4").symlink_to(root / "a" / "v001.mp4")  # one file by two names: listed once
    (tmp_path / "out").mkdir()
    (root / "into_out.mp4").symlink_to(tmp_path / "out" / "clip.mp4")  # a link into the output folder: never input
    (tmp_path / "out" / "clip.mp4").write_bytes(b"")
    counts = []
    for files in (FILES, 2 * FILES):
        _videos(root, files // 2, files)
        calls = _count(monkeypatch)
        sources = expand([str(root)], exclude=tmp_path / "out")
        monkeypatch.undo()
        assert sorted(os.path.basename(s.path) for s in sources) == [f"v{n:03d}.mp4" for n in range(files)]
        counts.append(calls)
    assert counts[0] == counts[1], counts  # per folder and per link, not per file
