"""Seconds for ``vfm eval``'s clip-score and fvd on N small videos, with full-size random-init networks.

    python benchmarks/eval_metrics.py [--videos 8] [--frames 16] [--size 64] [--device auto]

clip-score: a ViT-B/32-sized CLIP (transformers' CLIPConfig defaults), every frame of every video. fvd:
the full Kinetics-400 I3D (width 1) on 16x224x224 clips; the reference set is N more videos, timed once
with the statistics computed (a cache miss) and once read from the cache. Random weights cost what
trained ones do; the scores themselves mean nothing here. Prints one table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.infer.metric_models import _word_tokenizer, tiny_i3d_weights, write_videos  # noqa: E402


def clip_folder(folder: Path) -> Path:
    import torch
    import transformers as tf

    _word_tokenizer(folder, 77)
    torch.manual_seed(0)
    tf.CLIPModel(tf.CLIPConfig()).save_pretrained(folder)
    tf.CLIPImageProcessor().save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=8)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    import torch

    from vfm_infer.metrics.base import load_metric, read_items
    from vfm_infer.metrics.fvd import SmallSampleWarning

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_videos(tmp / "videos", range(args.videos), frames=args.frames, size=args.size)
        write_videos(tmp / "real", range(100, 100 + args.videos), frames=args.frames, size=args.size)
        items = read_items(tmp / "videos", ["a red square moving right"] * args.videos)

        start = time.perf_counter()
        metric = load_metric("clip-score", {"model": str(clip_folder(tmp / "clip")), "device": args.device})
        metric.load()
        rows.append(("clip-score: load ViT-B/32", time.perf_counter() - start))
        start = time.perf_counter()
        metric.evaluate(items)
        rows.append((f"clip-score: {args.videos} videos x {args.frames} frames", time.perf_counter() - start))

        weights = tiny_i3d_weights(tmp / "i3d.safetensors", width=1, size=224)
        options = {"reference": str(tmp / "real"), "weights": str(weights), "cache_dir": str(tmp / "cache"),
                   "device": args.device}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallSampleWarning)
            for label in ("reference computed", "reference from the cache"):
                start = time.perf_counter()
                load_metric("fvd", options).evaluate(items)
                rows.append((f"fvd: {args.videos} videos, {label}", time.perf_counter() - start))

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"device {device}, torch threads {torch.get_num_threads()}, videos {args.frames} frames of {args.size}x{args.size}")
    print(f"{'what':<48} {'seconds':>8}")
    for what, seconds in rows:
        print(f"{what:<48} {seconds:>8.2f}")


if __name__ == "__main__":
    main()
