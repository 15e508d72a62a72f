"""What a re-run's plan costs near a million finished videos: finding whether a new path is a
video the folder clipped (moved or copied), by reading every record (before the input index) or by
the input index (:mod:`vfm_curator.io.input_index`), and the index's one-time build for a folder
made before it.

Writes N synthetic records (about the size of a real one) into a temp folder, then times, for K new
paths (half of them the bytes of a finished video, half new bytes): the full read of the records
that the plan did once per run with a new path, and the index lookups. Warm page cache both ways
(the records were just written); a cold cache widens the gap (one file read per record).

    python benchmarks/curator_state.py [--records 100000] [--new 100]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path


def fake_record(i: int) -> tuple[str, dict]:
    source = f"/data/raw/folder{i // 1000:04d}/video{i:07d}.mp4"
    vid = hashlib.sha1(source.encode()).hexdigest()[:16]
    fp = hashlib.sha256(f"bytes{i}".encode()).hexdigest()[:32]
    return vid, {
        "video_id": vid, "source": source, "status": "ok", "failure": None, "duration_s": 42.0, "clips": 5,
        "meta": {"fps": 24.0, "width": 1280, "height": 720, "decoder": "pyav"},
        "timings": {s: 0.5 for s in ("decode", "split", "stitch", "transcode", "embed", "caption", "filter", "write")},
        "options_hashes": {s: hashlib.sha1(s.encode()).hexdigest()[:16] for s in ("*", "decode", "split", "write")},
        "attempt_id": hashlib.sha1(vid.encode()).hexdigest()[:32],
        "input": {"stamp": [123456789, 1700000000000000000 + i], "fingerprint": fp, "caption": None},
        "clip_seconds": 40.0, "rejected": 1, "thumbs": [f"thumbs/{vid}{k}.jpg" for k in range(5)], "filtered": [],
    }


def read_every_record(out: Path) -> dict[tuple, str]:
    """The plan's lookup before the index (``_clipped_inputs``): every record, once per run."""
    from vfm_curator.io import state

    found: dict[tuple, str] = {}
    for record in state.records(out):
        kept = record.get("input") or {}
        if record.get("status") == "ok" and kept.get("fingerprint"):
            found.setdefault((kept["fingerprint"], kept.get("caption")), record.get("source", ""))
    return found


def main() -> None:
    from vfm_curator.io import input_index
    from vfm_curator.pipelines.clipping import _earlier_video  # the plan's lookup itself, not a copy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=100, help="new paths in the re-run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        videos = out / ".state" / "videos"
        videos.mkdir(parents=True)
        t0 = time.perf_counter()
        for i in range(args.records):
            vid, record = fake_record(i)
            (videos / f"{vid}.json").write_text(json.dumps(record, sort_keys=True))
        print(f"setup: {args.records} records written in {time.perf_counter() - t0:.1f} s")
        wanted = [fake_record(i)[1]["input"]["fingerprint"] for i in range(0, args.records, max(1, 2 * args.records // args.new))]
        wanted += [hashlib.sha256(f"new{i}".encode()).hexdigest()[:32] for i in range(args.new - len(wanted))]

        t0 = time.perf_counter()
        found = read_every_record(out)
        hits_before = sum((fp, None) in found for fp in wanted)
        before = time.perf_counter() - t0

        t0 = time.perf_counter()
        input_index.ensure(out)
        build = time.perf_counter() - t0

        t0 = time.perf_counter()
        hits_after = sum(_earlier_video(out, {"fingerprint": fp, "caption": None}, set()) is not None for fp in wanted)
        after = time.perf_counter() - t0
        assert hits_before == hits_after, (hits_before, hits_after)

        print(f"\n{'lookup of ' + str(len(wanted)) + ' new paths':<44} {'seconds':>9}")
        print(f"{'every record read (before)':<44} {before:>9.3f}")
        print(f"{'input index (after)':<44} {after:>9.3f}")
        print(f"{'index built from the records (once/folder)':<44} {build:>9.3f}")
        print(f"\n{args.records} finished videos, {hits_after} of the new paths found clipped; speed-up {before / after:.0f}x")


if __name__ == "__main__":
    main()
