"""Decode-only frames/s of every decoder backend on a 720p and a 1080p H264 video (camera-like
panning shots, libx264 CRF 20, made here by ``benchmarks/curator_gpu.py``'s writer), at full size
and at the decode stage's 64-wide size, and which backend ``auto`` picks for each; availability
reasons for the backends that cannot run. A backend that fails is reported, not fatal.

    python benchmarks/gpu_session/decode_fps.py --seconds 12 --frames 256 --json decode_fps.json
    python benchmarks/gpu_session/decode_fps.py --smoke          # any machine: tiny, a code-path check
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: curator_gpu's video writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="720p,1080p")
    parser.add_argument("--seconds", type=float, default=12.0, help="length of each video")
    parser.add_argument("--frames", type=int, default=256, help="frames timed per backend and size")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="one 2 s 360p video, 24 frames")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.seconds, args.frames = "360p", 2.0, 24

    from curator_gpu import SIZES, make_videos
    from vfm_curator import decoders
    from vfm_curator.io.video import probe, small_size

    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    bad = [s for s in sizes if s not in SIZES]
    if bad or not sizes:
        parser.error(f"--sizes: unknown {', '.join(bad) or '(none)'}; accepted: {', '.join(SIZES)}")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="vfm-decode-fps-"))
    videos = make_videos(root, len(sizes), args.seconds, sizes)
    available = decoders.availability()
    print("backends: " + "; ".join(f"{n} {'yes' if ok else 'no'} ({why})" for n, (ok, why) in available.items()), flush=True)
    rows = []
    print(f"{'video':<16} {'decoder':<10} {'full fps':>9} {'64-wide fps':>12}", flush=True)
    for video in videos:
        info = probe(str(video))
        small = small_size(info.width, info.height, 64)
        for name, (ok, why) in available.items():
            row = dict(video=video.name, width=info.width, height=info.height, decoder=name, available=ok, why=why)
            if ok:
                for key, size in (("full_fps", None), ("small_fps", small)):
                    try:
                        row[key] = decoders.measure(name, str(video), frames=args.frames, size=size)
                    except Exception as exc:  # noqa: BLE001 - a backend that fails is reported
                        row[key] = None
                        row.setdefault("errors", []).append(f"{key}: {type(exc).__name__}: {exc}"[:300])
            rows.append(row)
            cells = [f"{row[k]:.0f}" if row.get(k) else ("failed" if ok else "-") for k in ("full_fps", "small_fps")]
            print(f"{video.name:<16} {name:<10} {cells[0]:>9} {cells[1]:>12}" + ("" if ok else f"  {why}"), flush=True)
        try:
            choice = decoders.choose(str(video), frames=64, size=small)
            picked = f"{choice.name} ({choice.reason})"
        except Exception as exc:  # noqa: BLE001
            picked = f"failed: {type(exc).__name__}: {exc}"[:200]
        print(f"{video.name:<16} auto picks {picked}", flush=True)
        rows.append(dict(video=video.name, auto=picked))
    if args.json:
        import torch

        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
        args.json.write_text(json.dumps(dict(device=device, frames=args.frames, seconds=args.seconds, smoke=args.smoke,
                                             time=time.strftime("%Y-%m-%d %H:%M:%S"), rows=rows), indent=1))


if __name__ == "__main__":
    main()
