"""Throughput of the sharding pipeline on CPU: samples/s of ``vfm_curator.shard`` at 256x256x17,
against the tokenizer alone on the same frames in the same process (the ceiling the pipeline can
reach: decode, text encoding and writing are the overhead).

    python benchmarks/shard_throughput.py                         # causal3d, default size (base 64)
    python benchmarks/shard_throughput.py --base-channels 16 --samples 8 --runner ray
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import vfm_curator
from vfm_curator.stages.shard_decode import load_frames
from vfm_curator.stages.shard_tokenize import build_tokenizer, to_pixels
from vfm_curator.synth import make_video


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="causal3d")
    ap.add_argument("--base-channels", type=int, default=64, help="causal3d width (64 = its default)")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--frames", type=int, default=17)
    ap.add_argument("--runner", default="serial", choices=["serial", "ray"])
    args = ap.parse_args()
    options = {"base_channels": args.base_channels} if args.tokenizer == "causal3d" else {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(args.samples):  # one clip per video: a single shot of frames + 3
            make_video(root / "in" / f"v{i}.mp4", [args.frames + 3], width=args.size, height=args.size, seed=i)
            (root / "in" / f"v{i}.txt").write_text(f"synthetic video number {i}")
        vfm_curator.curate(root / "in", root / "clips", {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.1}}})
        t0 = time.perf_counter()
        summary = vfm_curator.shard(root / "clips", root / "shards", {"run": {"runner": args.runner}}, tokenizer=args.tokenizer,
                                    text_encoder="hash", tokenizer_options=options, resolutions=[[args.size, args.size]],
                                    frames=[args.frames])
        total_s = time.perf_counter() - t0
        assert summary.written == args.samples, summary.as_dict()
        # baseline: the tokenizer alone on the same frames, batch 1, same process
        clip = next((root / "clips" / "clips").glob("*.mp4"))
        pixels = to_pixels(load_frames(str(clip), args.size, args.size, args.frames)[None])
        tokenizer = build_tokenizer(args.tokenizer, options)
        with torch.inference_mode():
            tokenizer.encode(pixels)  # warm-up
            t1 = time.perf_counter()
            for _ in range(args.samples):
                tokenizer.encode(pixels)
            encode_s = time.perf_counter() - t1
    rows = [
        ("tokenizer", f"{args.tokenizer} (base_channels {args.base_channels})" if options else args.tokenizer),
        ("shape (H x W x T)", f"{args.size}x{args.size}x{args.frames}"),
        ("runner / torch threads", f"{args.runner} / {torch.get_num_threads()}"),
        ("samples", args.samples),
        ("pipeline samples/s (stages + write)", f"{summary.throughput:.4f}"),
        ("pipeline samples/s incl. set-up, energon, blend", f"{args.samples / total_s:.4f}"),
        ("tokenizer-only samples/s (baseline)", f"{args.samples / encode_s:.4f}"),
        ("pipeline / baseline", f"{summary.throughput / (args.samples / encode_s):.3f}"),
        ("bytes per sample", f"{summary.bytes / max(summary.samples, 1):.0f}"),
        ("tokens per sample (patch 1)", f"{summary.tokens // max(summary.samples, 1)}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
