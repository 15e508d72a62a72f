"""Clipping throughput: the Ray pipeline with its auto-balancer vs a naive sequential baseline.

Both run on the same synthetic H264 videos. The baseline decodes, detects shots and transcodes one
video after another in this process; the pipeline runs every stage (decode, split, stitch,
transcode, embed, caption, filter, write) streaming on a local Ray. Prints video-seconds processed
per wall-second for both, and the auto-balancer's worker allocation.

    python benchmarks/curator_throughput.py [--videos 12] [--seconds 8] [--num-cpus N]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each video")
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=180)
    parser.add_argument("--num-cpus", type=float, default=None, help="local Ray CPUs (default: this machine's)")
    args = parser.parse_args()

    import numpy as np

    import vfm_curator
    from vfm_curator.execution.session import ensure_ray
    from vfm_curator.stages.decode import DecodeStage
    from vfm_curator.stages.split import SplitStage
    from vfm_curator.stages.transcode import TranscodeStage
    from vfm_curator.synth import make_video
    from vfm_curator.tasks import VideoTask

    root = Path(tempfile.mkdtemp(prefix="vfm-curator-bench-"))
    fps = 24
    rng = np.random.default_rng(0)
    for i in range(args.videos):
        total = int(args.seconds * fps)
        cuts = sorted(rng.choice(np.arange(24, total - 24), size=3, replace=False))
        lengths = np.diff([0, *cuts, total]).tolist()
        make_video(root / "in" / f"v{i:03d}.mp4", lengths, seed=i, width=args.width, height=args.height, fps=fps)
    inputs = sorted((root / "in").glob("*.mp4"))
    video_s = args.videos * int(args.seconds * fps) / fps

    # naive baseline: one process, one video after another
    stages = [DecodeStage(), SplitStage(), TranscodeStage()]
    t0 = time.perf_counter()
    baseline_clips = 0
    for path in inputs:
        task = VideoTask(str(path))
        for stage in stages:
            stage.process([task])
        assert task.failure is None, task.failure
        baseline_clips += len(task.clips)
    baseline_wall = time.perf_counter() - t0

    t0 = time.perf_counter()
    ensure_ray(num_cpus=args.num_cpus)
    ray_start = time.perf_counter() - t0
    summary = vfm_curator.curate([str(root / "in")], root / "out", {"run": {"balance_interval_s": 1.0}})
    pipeline_wall = summary.wall_s
    # the same work as the baseline (plus writing the clips), on the now warm Ray workers
    same = vfm_curator.curate([str(root / "in")], root / "out3", {"stages": ["decode", "split", "transcode", "write"],
                                                                   "options": {"write": {"thumbnails": False}}})

    print(f"{args.videos} videos x {args.seconds:g} s at {args.width}x{args.height}, {fps} fps; "
          f"{os.cpu_count()} CPU cores; Ray start {ray_start:.1f} s (not counted)")
    print(f"{'run':<34}{'wall s':>8}{'clips':>7}{'video-s / wall-s':>18}{'ratio':>7}")
    base_rate = video_s / baseline_wall
    print(f"{'sequential (decode, detect, transcode)':<34}"[:34] + f"{baseline_wall:>8.2f}{baseline_clips:>7}{base_rate:>18.2f}{1.0:>7.2f}")
    rate = video_s / pipeline_wall
    print(f"{'Ray pipeline (all 8 stages)':<34}{pipeline_wall:>8.2f}{summary.clips:>7}{rate:>18.2f}{rate / base_rate:>7.2f}")
    rate3 = video_s / same.wall_s
    print(f"{'Ray (decode, split, transcode, write)':<34}"[:34] + f"{same.wall_s:>8.2f}{same.clips:>7}{rate3:>18.2f}{rate3 / base_rate:>7.2f}")
    print("auto-balancer: measured seconds per video and workers (last decision)")
    last = summary.decisions[-1] if summary.decisions else {"seconds_per_item": {}, "workers": summary.workers}
    print(f"{'stage':<12}{'s / video':>10}{'workers':>9}{'peak running':>14}")
    for name, peak in summary.workers.items():
        spi = last["seconds_per_item"].get(name, float("nan"))
        print(f"{name:<12}{spi:>10.3f}{last['workers'].get(name, 1):>9}{peak:>14}")
    print(f"balancer decisions: {len(summary.decisions)} (logged to {root / 'out' / 'balancer.jsonl'})")
    if summary.decisions:
        print("first decision:", json.dumps(summary.decisions[0]["workers"]))


if __name__ == "__main__":
    main()
