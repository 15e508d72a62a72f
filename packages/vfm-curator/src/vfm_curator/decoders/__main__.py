"""``python -m vfm_curator.decoders VIDEO [--frames N] [--width W]``: which backends are available
here, and each one's decode-only frames/s on VIDEO (what ``auto`` would measure)."""

from __future__ import annotations

import argparse

from vfm_curator.decoders import availability, choose, measure
from vfm_curator.errors import InputError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vfm_curator.decoders", description=__doc__)
    parser.add_argument("video")
    parser.add_argument("--frames", type=int, default=256, help="frames to time per backend (default 256)")
    parser.add_argument("--width", type=int, default=0, help="decode scaled to this width (default: full size)")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.width < 0:
        parser.error(f"--frames must be >= 1 and --width >= 0 (0: full size), got {args.frames} and {args.width}")
    try:
        return _report(args)
    except InputError as exc:  # not a video this machine can decode: one line, not a traceback
        parser.exit(2, f"{parser.prog}: {args.video}: {exc}\n")


def _report(args: argparse.Namespace) -> int:
    size = None
    if args.width:
        from vfm_curator.io.video import probe, small_size

        info = probe(args.video)
        size = small_size(info.width, info.height, args.width)
    print(f"{'decoder':<10} {'frames/s':>9}  notes")
    for name, (ok, why) in availability().items():
        fps = f"{measure(name, args.video, args.frames, size):9.1f}" if ok else f"{'-':>9}"
        print(f"{name:<10} {fps}  {why}")
    print(f"auto picks: {choose(args.video, frames=args.frames, size=size).name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
