"""Peak resident memory of curating one 720p video, against the video's length.

Generates synthetic 720p H264 videos (plain backgrounds that change at hard cuts every 3-8 s, a
moving square, one fade; `ultrafast` preset; longer ones repeat a 2-minute one by copying packets,
so generation is quick) of each length, cached in a temp folder, then curates each in its own subprocess (in-process runner: every stage in one
process, the worst case for one worker) and prints the subprocess's peak resident set size.
Shot detection streams, so the figure should not grow with the length.

    python benchmarks/curator_memory.py [--minutes 2 10 30] [--fps 24] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

WIDTH, HEIGHT = 1280, 720


def make_long_video(path: Path, minutes: float, fps: int, seed: int = 0) -> int:
    """Write the video frame by frame (never more than one frame in memory); returns its cut count."""
    import av
    import numpy as np

    rng = np.random.default_rng(seed)
    total = int(minutes * 60 * fps)
    tmp = path.with_name(f".{path.name}.tmp.mp4")
    container = av.open(str(tmp), "w")
    stream = container.add_stream("libx264", rate=Fraction(fps))
    stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
    stream.options = {"preset": "ultrafast", "crf": "23"}
    y = np.empty((HEIGHT, WIDTH), np.uint8)
    uv = np.empty((HEIGHT // 2, WIDTH), np.uint8)  # U then V, each (HEIGHT/4, WIDTH) as PyAV lays them
    frame_i, cuts, shot = 0, 0, 0
    while frame_i < total:
        length = min(int(rng.integers(3 * fps, 8 * fps)), total - frame_i)
        luma, u, v = (int(x) for x in rng.integers(40, 216, size=3))
        fade = shot == 1  # the second shot fades to white over its last second
        for t in range(length):
            level = luma
            if fade and t >= length - fps:
                level = int(luma + (255 - luma) * (t - (length - fps)) / fps)
            y[:] = level
            x0 = int((t * 7) % (WIDTH - 160))
            y[280:440, x0 : x0 + 160] = 255 - level  # the moving square
            uv[: HEIGHT // 4] = u
            uv[HEIGHT // 4 :] = v
            frame = av.VideoFrame.from_ndarray(np.concatenate([y, uv]), format="yuv420p")
            frame.pts = frame_i
            frame_i += 1
            for packet in stream.encode(frame):
                container.mux(packet)
        cuts += frame_i < total
        shot += 1
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    os.replace(tmp, path)
    return cuts


def repeat_video(base: Path, path: Path, times: int) -> None:
    """``base`` played ``times`` times in a row, by copying its packets with shifted timestamps (no
    re-encoding, so a long video takes seconds; each copy starts on a key frame)."""
    import av

    tmp = path.with_name(f".{path.name}.tmp.mp4")
    with av.open(str(base)) as src, av.open(str(tmp), "w") as dst:
        in_stream = src.streams.video[0]
        out_stream = dst.add_stream_from_template(in_stream)
        packets = [p for p in src.demux(in_stream) if p.dts is not None]
        span = max(p.pts + p.duration for p in packets) - min(p.pts for p in packets)
        for k in range(times):
            for p in packets:
                p.stream = out_stream
                p.pts, p.dts = p.pts + (span if k else 0), p.dts + (span if k else 0)
                dst.mux(p)
    os.replace(tmp, path)


def child(video: str, out: str) -> None:
    """Curate one video in this process and print what it took as JSON."""
    import vfm_curator

    t0 = time.perf_counter()
    summary = vfm_curator.curate([video], out, {"run": {"runner": "serial"}})
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    print(json.dumps({"peak_mb": peak_kb / 1024, "wall_s": time.perf_counter() - t0, "clips": summary.clips,
                      "failures": summary.failures}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[2, 10, 30])
    parser.add_argument("--fps", type=int, default=24)
    parser.add_argument("--base-minutes", type=float, default=2.0,
                        help="longer videos repeat one video of this length (packet copy, no encoding)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "vfm-curator-memory-bench"))
    parser.add_argument("--child", nargs=2, metavar=("VIDEO", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for minutes in args.minutes:
        video = cache / f"720p-{minutes:g}min-{args.fps}fps.mp4"
        made = ""
        if not video.exists():
            t0 = time.perf_counter()
            base = cache / f"720p-{args.base_minutes:g}min-{args.fps}fps.mp4"
            if minutes > args.base_minutes and float(minutes / args.base_minutes).is_integer():
                if not base.exists():
                    make_long_video(base, args.base_minutes, args.fps)
                repeat_video(base, video, int(minutes / args.base_minutes))
            else:
                make_long_video(video, minutes, args.fps)
            made = f" (generated in {time.perf_counter() - t0:.0f} s)"
        print(f"{minutes:g} min: {video}{made}", flush=True)
        with tempfile.TemporaryDirectory(prefix="vfm-curate-", dir=cache) as out:
            result = subprocess.run([sys.executable, __file__, "--child", str(video), out],
                                    capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"curating {video} failed:\n{result.stderr[-2000:]}")
        rows.append((minutes, json.loads(result.stdout.strip().splitlines()[-1])))
        print(f"  peak RSS {rows[-1][1]['peak_mb']:.0f} MB, {rows[-1][1]['wall_s']:.0f} s", flush=True)

    base = rows[0][1]["peak_mb"]
    print(f"\n720p H264, {args.fps} fps, in-process runner, all default stages; {os.cpu_count()} CPU cores")
    print(f"{'minutes':>8}{'frames':>9}{'clips':>7}{'wall s':>9}{'peak RSS MB':>13}{'ratio':>7}")
    for minutes, r in rows:
        print(f"{minutes:>8g}{int(minutes * 60 * args.fps):>9}{r['clips']:>7}{r['wall_s']:>9.1f}"
              f"{r['peak_mb']:>13.0f}{r['peak_mb'] / base:>7.2f}")
    peaks = [r["peak_mb"] for _, r in rows]
    spread = max(peaks) / min(peaks) - 1
    verdict = "ok" if spread <= 0.2 and max(peaks) < 600 else "NOT flat"
    print(f"spread {spread:.1%} (target <= 20 %), max {max(peaks):.0f} MB (target < 600 MB): {verdict}")


if __name__ == "__main__":
    main()
