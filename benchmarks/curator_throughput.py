"""Clipping throughput: the Ray pipeline with its auto-balancer vs a naive sequential baseline.

All run on the same synthetic H264 videos. Two sequential baselines, in this process, one video
after another: the naive one (decode, detect shots, transcode; no output written) and the same work
as the pipeline (every stage: decode, split, stitch, transcode, embed, caption, filter, write,
through the in-process runner, libx264 with its own threads: its best setting). The pipeline runs
every stage streaming on a local Ray, cold (its workers start during the run) and warm; adjacent
CPU stages are fused into one Ray call (all 8 here: one call per video). Prints video-seconds
processed per wall-second, each run's ratio to both baselines, the auto-balancer's worker
allocation, and the CPU bound: the pipeline's measured stage-seconds per video over this machine's
cores is the most any runner could do. The machine's load average is printed before the runs and
beside each run, with the share of CPU time the host took from this (virtual) machine during the run
(steal; /proc/stat): other work slows the 2-worker pipeline more than a 1-process baseline, so on a
shared machine compare ratios of one run of this script only.

    python benchmarks/curator_throughput.py [--videos 12] [--seconds 8] [--num-cpus N]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def cpu_counters() -> tuple[int, int] | None:
    """(steal, total) CPU jiffies of this machine so far (/proc/stat), None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def steal_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    if before is None or after is None or after[1] <= before[1]:
        return float("nan")
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


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
    load_before = os.getloadavg()

    # naive baseline: one process, one video after another
    stages = [DecodeStage(), SplitStage(), TranscodeStage()]
    steal: dict[str, float] = {}
    c0 = cpu_counters()
    t0 = time.perf_counter()
    baseline_clips = 0
    for path in inputs:
        task = VideoTask(str(path))
        for stage in stages:
            stage.process([task])
        assert task.failure is None, task.failure
        baseline_clips += len(task.clips)
    baseline_wall = time.perf_counter() - t0
    load = {"naive": os.getloadavg()[0]}
    steal["naive"], c0 = steal_pct(c0, cpu_counters()), cpu_counters()
    # the same work as the pipeline, in this process (no Ray started yet)
    serial = vfm_curator.curate([str(root / "in")], root / "serial", {"run": {"runner": "serial"}})
    load["serial"] = os.getloadavg()[0]
    steal["serial"] = steal_pct(c0, cpu_counters())

    t0 = time.perf_counter()
    ensure_ray(num_cpus=args.num_cpus)
    ray_start = time.perf_counter() - t0
    c0 = cpu_counters()
    summary = vfm_curator.curate([str(root / "in")], root / "out", {"run": {"balance_interval_s": 1.0}})
    pipeline_wall = summary.wall_s
    load["cold"] = os.getloadavg()[0]
    steal["cold"], c0 = steal_pct(c0, cpu_counters()), cpu_counters()
    warm = vfm_curator.curate([str(root / "in")], root / "warm", {"run": {"balance_interval_s": 1.0}})
    load["warm"] = os.getloadavg()[0]
    steal["warm"], c0 = steal_pct(c0, cpu_counters()), cpu_counters()

    same = vfm_curator.curate([str(root / "in")], root / "out3", {"stages": ["decode", "split", "transcode", "write"],
                                                                   "options": {"write": {"thumbnails": False}}})
    load["same"] = os.getloadavg()[0]
    steal["same"] = steal_pct(c0, cpu_counters())

    print(f"{args.videos} videos x {args.seconds:g} s at {args.width}x{args.height}, {fps} fps; "
          f"{os.cpu_count()} CPU cores; Ray start {ray_start:.1f} s (not counted); load average before the runs "
          + " / ".join(f"{x:.1f}" for x in load_before) + " (1 / 5 / 15 min)")
    base_rate, serial_rate = video_s / baseline_wall, video_s / serial.wall_s
    print(f"{'run':<40}{'wall s':>8}{'clips':>7}{'video-s/wall-s':>16}{'vs naive':>10}{'vs serial':>11}{'load':>6}{'steal %':>9}")
    rows = [
        ("sequential naive (decode, detect, transcode)", baseline_wall, baseline_clips, "naive"),
        ("sequential, all 8 stages (serial runner)", serial.wall_s, serial.clips, "serial"),
        ("Ray pipeline, all 8 stages, cold", pipeline_wall, summary.clips, "cold"),
        ("Ray pipeline, all 8 stages, warm", warm.wall_s, warm.clips, "warm"),
        ("Ray (decode, split, transcode, write)", same.wall_s, same.clips, "same"),
    ]
    for label, wall, clips, key in rows:
        rate = video_s / wall
        print(f"{label[:40]:<40}{wall:>8.2f}{clips:>7}{rate:>16.2f}{rate / base_rate:>10.2f}{rate / serial_rate:>11.2f}"
              f"{load[key]:>6.1f}{steal[key]:>9.1f}")
    print("auto-balancer: measured seconds per video and workers (last decision)")
    last = summary.decisions[-1] if summary.decisions else {"seconds_per_item": {}, "workers": summary.workers}
    print(f"{'stage':<12}{'s / video':>10}{'workers':>9}{'peak running':>14}")
    for name, peak in summary.workers.items():
        spi = last["seconds_per_item"].get(name, float("nan"))
        print(f"{name:<12}{spi:>10.3f}{last['workers'].get(name, 1):>9}{peak:>14}")
    print(f"balancer decisions: {len(summary.decisions)} (logged to {root / 'out' / 'balancer.jsonl'})")
    if summary.decisions:
        print("first decision:", json.dumps(summary.decisions[0]["workers"]))
        for group, g in summary.decisions[-1].get("groups", {}).items():
            print(f"fused group: {group}: {g['seconds_per_item']:.3f} s / video, {g['workers']} workers (one Ray call per video)")
    # The CPU bound: stage-seconds per video (measured in the warm run's workers) over the cores
    measured = warm.decisions[-1]["seconds_per_item"] if warm.decisions else {}
    if measured:
        per_video = sum(measured.values())  # seconds of stage work per video
        cores = args.num_cpus or os.cpu_count() or 1
        bound = cores * (video_s / args.videos) / per_video
        print(f"CPU bound: {per_video:.3f} stage-seconds per video (warm run) on {cores:g} cores -> at most "
              f"{bound:.2f} video-s/wall-s, {bound / base_rate:.2f}x naive, {bound / serial_rate:.2f}x serial")


if __name__ == "__main__":
    main()
