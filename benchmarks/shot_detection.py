"""Shot detection speed: ours (decode stage + ``content`` detector) vs PySceneDetect's ContentDetector.

Both run in this process on the same synthetic H264 file (known cuts, drifting colour patterns
with film grain, so the stream has a realistic bit rate), each given the whole machine. Checks
that both find the same cuts (within one frame) and that both find the true ones, then prints
wall time and frames/s of each and the ratio ours / theirs (under 1: ours is faster). With
``--adaptive`` it also runs both AdaptiveDetectors and compares their cuts; with
``--transnetv2-frames N`` it times the TransNetV2 detector (random weights) on the first N frames.

PySceneDetect is a benchmark-only dependency (hatch env ``bench``)::

    hatch run bench:python benchmarks/shot_detection.py [--size 720p|480p] [--seconds 60] [--repeats 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from fractions import Fraction
from pathlib import Path

SIZES = {"720p": (1280, 720), "480p": (854, 480), "1080p": (1920, 1080)}


def synth_video(path: Path, width: int, height: int, seconds: float, fps: float, seed: int) -> list[int]:
    """Write shots of 1-8 s (drifting patterns plus grain) one frame at a time; returns the cut frames."""
    import av
    import numpy as np

    from vfm_curator.synth import shot_frames

    rng = np.random.default_rng(seed)
    total = int(round(seconds * fps))
    lengths: list[int] = []
    while sum(lengths) < total:
        lengths.append(int(rng.integers(int(fps), int(8 * fps))))
    lengths[-1] -= sum(lengths) - total
    if lengths[-1] < fps:  # keep every shot at least a second long
        lengths[-2] += lengths.pop()
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = {"crf": "23", "preset": "veryfast"}
    cuts, index = [], 0
    for length in lengths:
        if index:
            cuts.append(index)
        index += length
        for img in shot_frames(length, width, height, np.random.default_rng(rng.integers(1 << 31)), speed=2.0):
            grain = rng.normal(0.0, 4.0, size=img.shape[:2])[..., None]
            frame = av.VideoFrame.from_ndarray(np.clip(img + grain, 0, 255).astype(np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return cuts


def ours(path: str, min_shot: int, adaptive: bool) -> tuple[list[int], int]:
    from vfm_curator.shot_detectors.content import AdaptiveDetector, ContentDetector
    from vfm_curator.stages.decode import DecodeStage
    from vfm_curator.tasks import VideoTask

    task = VideoTask(path)
    DecodeStage().process([task])
    assert task.failure is None, task.failure
    fps = float(task.meta["fps"])
    detector = (AdaptiveDetector(min_shot_s=min_shot / fps) if adaptive else ContentDetector(min_shot_s=min_shot / fps))
    spans = detector.spans(task.cut_scores, fps=fps)
    return [a for a, _ in spans[1:]], len(task.times)


def theirs(path: str, min_shot: int, adaptive: bool) -> tuple[list[int], int]:
    from scenedetect import AdaptiveDetector, ContentDetector, SceneManager, open_video

    video = open_video(path)
    manager = SceneManager()
    manager.auto_downscale = True  # its default: frames scaled to about 256 px wide before scoring
    manager.add_detector(AdaptiveDetector(min_scene_len=min_shot) if adaptive else ContentDetector(min_scene_len=min_shot))
    frames = manager.detect_scenes(video)
    scenes = manager.get_scene_list(start_in_scene=True)
    return [start.frame_num for start, _ in scenes[1:]], frames


def transnetv2_speed(path: str, frames: int) -> None:
    """Frames/s of the transnetv2 detector (decode at 48x27 + the network) on the first ``frames``."""
    import itertools

    import torch

    from vfm_curator.io.video import iter_frames
    from vfm_curator.shot_detectors.transnetv2 import TransNetV2Detector

    detector = TransNetV2Detector(random_init=True)
    detector.setup()
    stream = (f for _, f in itertools.islice(iter_frames(path, width=48, height=27), frames))
    t0 = time.perf_counter()
    n = len(detector.frame_scores(stream))
    wall = time.perf_counter() - t0
    print(f"transnetv2 on {detector.device} ({torch.get_num_threads()} threads): {n} frames in {wall:.2f} s, "
          f"{n / wall:.0f} frames/s (random weights: speed only)")


def agree(a: list[int], b: list[int], tolerance: int = 1) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= tolerance for x, y in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="720p")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each (alternating); the fastest counts")
    parser.add_argument("--min-shot", type=int, default=15, help="frames between cuts (PySceneDetect's default)")
    parser.add_argument("--adaptive", action="store_true", help="also compare the two AdaptiveDetectors")
    parser.add_argument("--transnetv2-frames", type=int, default=0,
                        help="also time TransNetV2 (random weights: speed only) on this many frames; 0: skip")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vfm-shot-bench")
    args = parser.parse_args()

    width, height = SIZES[args.size]
    key = hashlib.sha1(json.dumps([width, height, args.seconds, args.fps, args.seed, 2]).encode()).hexdigest()[:10]
    args.cache.mkdir(parents=True, exist_ok=True)
    path, truth_file = args.cache / f"{args.size}-{key}.mp4", args.cache / f"{args.size}-{key}.json"
    if not truth_file.exists():
        print(f"writing {path} ({args.size}, {args.seconds:g} s at {args.fps:g} fps) ...", flush=True)
        truth_file.write_text(json.dumps(synth_video(path, width, height, args.seconds, args.fps, args.seed)))
    truth = json.loads(truth_file.read_text())
    path.read_bytes()  # in the page cache for both

    # imports outside the timed calls (both sides import lazily)
    import scenedetect  # noqa: F401
    import vfm_curator.shot_detectors.content  # noqa: F401
    import vfm_curator.stages.decode  # noqa: F401

    rows = []
    for label, adaptive in [("content", False)] + ([("adaptive", True)] if args.adaptive else []):
        best = {"ours": float("inf"), "theirs": float("inf")}
        found: dict[str, tuple[list[int], int]] = {}
        for _ in range(args.repeats):
            for name, fn in (("ours", ours), ("theirs", theirs)):
                t0 = time.perf_counter()
                found[name] = fn(str(path), args.min_shot, adaptive)
                best[name] = min(best[name], time.perf_counter() - t0)
        (our_cuts, our_frames), (their_cuts, their_frames) = found["ours"], found["theirs"]
        rows.append((label, best, our_frames, their_frames, agree(our_cuts, their_cuts), agree(our_cuts, truth),
                     agree(their_cuts, truth)))
        if not agree(our_cuts, their_cuts):
            print(f"{label}: the cuts differ\n  ours:   {our_cuts}\n  theirs: {their_cuts}\n  truth:  {truth}")

    if args.transnetv2_frames:
        transnetv2_speed(str(path), args.transnetv2_frames)
    print(f"\n{path.name}: {args.size} {args.seconds:g} s, {len(truth)} cuts, H264 {path.stat().st_size / 1e6:.1f} MB")
    print(f"{'detector':<10}{'ours s':>9}{'theirs s':>10}{'ours f/s':>10}{'theirs f/s':>12}{'ours/theirs':>13}"
          f"{'same cuts':>11}{'ours=truth':>12}{'theirs=truth':>14}")
    for label, best, nf_ours, nf_theirs, same, ours_ok, theirs_ok in rows:
        print(f"{label:<10}{best['ours']:>9.2f}{best['theirs']:>10.2f}{nf_ours / best['ours']:>10.0f}"
              f"{nf_theirs / best['theirs']:>12.0f}{best['ours'] / best['theirs']:>13.2f}{str(same):>11}"
              f"{str(ours_ok):>12}{str(theirs_ok):>14}")


if __name__ == "__main__":
    main()
