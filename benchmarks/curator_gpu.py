"""Curation on GPUs: the clipping pipeline CPU-only vs with GPU stages, on the same machine.

The pipeline is decode, split, stitch, transcode, embed (a CLIP model with ViT-B/16 vision dims at
random init, built from a config, saved to a temporary folder and loaded by the ``clip`` embedder),
filter, write, on a folder of synthetic 720p/1080p H264 videos (vfm_curator.synth: drifting colour
patterns with hard cuts). Two runs of the same config on the same videos:

- CPU-only (``--gpus 0``): decoder ``pyav``, stitch on the CPU, libx264, CLIP on the CPU in fp32;
- GPU stages (``--gpus 1``): decoder ``auto`` (measures the installed backends on the first video),
  stitch similarities on CUDA, encoder ``auto`` (NVENC when the card has one), CLIP on CUDA in bf16.

Prints video-seconds per wall-second of each run and their ratio (also without transcode, which an
H100 cannot move to the GPU: it has no NVENC), each stage's share of the stage time and the bounding stage, whether both runs cut the same clips (within one frame), and the
decode-only frames/s of each installed decoder backend (vfm_curator.decoders.measure).

    python benchmarks/curator_gpu.py                                 # a GPU machine: both runs
    python benchmarks/curator_gpu.py --cpu-only --videos 2 --seconds 4   # any machine: the CPU run only
    python benchmarks/curator_gpu.py --smoke     # any machine: a few seconds, checks the code paths

``--smoke`` is the CPU run at toy size (one 2 s 360p video, a 2-block CLIP, 24 decode frames), the
GPU run skipped where no CUDA device is visible: a check before GPU time is spent, not a figure.

``--runner serial`` (default) needs no Ray: stages run one after another, so the shares add up to
the wall time and the bounding stage is the one with the largest share. ``--runner ray`` runs the
stages concurrently with the auto-balancer; the bounding stage is then the one with the most
seconds per video per worker.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

SIZES = {"360p": (640, 360), "720p": (1280, 720), "1080p": (1920, 1080)}
STAGES = ["decode", "split", "stitch", "transcode", "embed", "filter", "write"]


def make_videos(folder: Path, count: int, seconds: float, sizes: list[str], fps: int = 24) -> list[Path]:
    """``count`` videos, sizes in turn, each with 3 or 4 hard cuts at random frames; made in parallel."""
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

    rng = np.random.default_rng(0)
    total = max(48, int(round(seconds * fps)))
    jobs = []
    for i in range(count):
        w, h = SIZES[sizes[i % len(sizes)]]
        cuts = sorted(rng.choice(np.arange(12, total - 12), size=min(3 + i % 2, total // 24), replace=False))
        jobs.append((folder / f"v{i:03d}_{h}p.mp4", np.diff([0, *cuts, total]).tolist(), w, h, fps, i))
    folder.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=max(1, min(count, os.cpu_count() or 1))) as pool:
        list(pool.map(write_panning_video, *zip(*jobs)))
    return [job[0] for job in jobs]


def write_panning_video(path: Path, shots: list[int], width: int, height: int, fps: int, seed: int,
                        speed: float = 2.0) -> None:
    """An H264 mp4 (libx264 veryfast, CRF 20, yuv420p) of camera-like shots: each a textured picture
    (vfm_curator.synth's colour pattern plus fixed fine grain) panned ``speed`` px per frame, cut hard
    to the next. Frames stream to the encoder (a 1080p minute is never held)."""
    from fractions import Fraction

    import av
    import numpy as np

    from vfm_curator.synth import shot_frames

    rng = np.random.default_rng(seed)
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=Fraction(fps))
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = {"crf": "20", "preset": "veryfast"}
    k = 0
    for length in shots:
        pad = int(np.ceil(speed * length)) + 1
        canvas = next(shot_frames(1, width + pad, height + pad, np.random.default_rng(rng.integers(1 << 31))))
        grain = rng.integers(-4, 5, size=canvas.shape, dtype=np.int16)
        canvas = np.clip(canvas.astype(np.int16) + grain, 0, 255).astype(np.uint8)
        angle = rng.uniform(0, np.pi / 2)  # pan right/down within the canvas
        for t in range(length):
            dx, dy = int(speed * t * np.cos(angle)), int(speed * t * np.sin(angle))
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(canvas[dy : dy + height, dx : dx + width]), format="rgb24")
            frame.pts = k
            k += 1
            for packet in stream.encode(frame):
                container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()


def make_clip_model(folder: Path, tiny: bool = False) -> str:
    """A CLIPModel with ViT-B/16 vision dims (86M parameters) and a tiny text tower, random init
    (``tiny``: a 2-block, 64-wide vision tower, for ``--smoke``)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(0)
    vision = (dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2) if tiny else
              dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12))
    cfg = CLIPConfig(
        vision_config=dict(**vision, image_size=224, patch_size=16),
        text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                         vocab_size=1000, max_position_embeddings=77),
        projection_dim=512,
    )
    CLIPModel(cfg).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(folder)
    return str(folder)


def config(model: str, gpus: int, runner: str, embed_batch: int):
    """The run's CurateConfig, through ``vfm curate --gpus N``'s own option handling."""
    from vfm_cli.commands.curate import apply_gpus
    from vfm_curator.config import CurateConfig
    from vfm_curator.plugins import host

    on_gpu = gpus > 0
    options = {
        "split": {"min_clip_s": 0.5, "max_clip_s": 20.0},
        "stitch": {"device": "cuda" if on_gpu else "cpu"},
        "transcode": {"encoder": "auto" if on_gpu else "libx264"},
        "embed": {"embedder": "clip", "embedder_options": {
            "model_path": model, "device": "cuda" if on_gpu else "cpu", "dtype": "bf16" if on_gpu else "fp32",
            "batch_size": embed_batch}},
        "filter": {},
        "write": {"thumbnails": False},
    }
    if "decoder" in host.get("stages", "decode").defaults:
        options["decode"] = {"decoder": "auto" if on_gpu else "pyav"}
    cfg = CurateConfig.from_dict({"stages": STAGES, "options": options, "run": {"runner": runner}})
    apply_gpus(cfg, gpus)
    return cfg


def stage_seconds(out: Path) -> dict[str, float]:
    """Seconds each stage spent, summed over every video's record."""
    from vfm_curator.io.state import records

    totals: dict[str, float] = {}
    for record in records(out):
        for stage, seconds in (record.get("timings") or {}).items():
            totals[stage] = totals.get(stage, 0.0) + float(seconds)
    return totals


def spans(out: Path) -> dict[str, list[tuple[int, int]]]:
    import pyarrow.parquet as pq

    table = out / "clips.parquet"
    result: dict[str, list[tuple[int, int]]] = {}
    if not table.is_file():
        return result
    for row in pq.read_table(table, columns=["source", "start_frame", "end_frame"]).to_pylist():
        result.setdefault(Path(row["source"]).name, []).append((int(row["start_frame"]), int(row["end_frame"])))
    return {k: sorted(v) for k, v in result.items()}


def run(label: str, inputs: Path, out: Path, cfg) -> dict:
    import vfm_curator

    t0 = time.perf_counter()
    summary = vfm_curator.curate([str(inputs)], out, cfg)
    wall = time.perf_counter() - t0
    seconds = stage_seconds(out)
    workers = dict(summary.workers or {})
    if cfg.runner == "ray" and workers:
        load = {s: v / max(1, workers.get(s, 1)) for s, v in seconds.items()}
    else:
        load = dict(seconds)
    bound = max(load, key=load.get) if load else "-"
    return {"label": label, "wall_s": summary.wall_s or wall, "video_s": summary.video_s_processed,
            "rate": summary.throughput, "clips": summary.clips, "failures": summary.failures,
            "stage_s": seconds, "bound": bound, "workers": workers, "spans": spans(out)}


def decode_only(path: Path, frames: int) -> list[tuple[str, str, str]]:
    """(backend, full-size fps, 64-wide fps or why not) for every registered decoder backend."""
    try:
        from vfm_curator import decoders
    except ImportError as exc:
        print(f"decode-only: skipped (vfm_curator.decoders is not installed here: {exc})")
        return []
    from vfm_curator.io.video import probe, small_size

    info = probe(str(path))
    small = small_size(info.width, info.height, 64)
    rows = []
    for name, (ok, why) in decoders.availability().items():
        if not ok:
            rows.append((name, "-", f"not available: {why}"))
            continue
        figures = []
        for size in (None, small):
            try:
                figures.append(f"{decoders.measure(name, str(path), frames=frames, size=size):.0f}")
            except Exception as exc:  # noqa: BLE001 - a backend that fails is reported, not fatal
                figures.append(f"failed: {type(exc).__name__}: {exc}"[:80])
        rows.append((name, *figures))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each video")
    parser.add_argument("--sizes", default="720p,1080p", help=f"comma-separated, in turn: {', '.join(SIZES)}")
    parser.add_argument("--cpu-only", action="store_true", help="only the CPU run (machines without CUDA)")
    parser.add_argument("--runner", default="serial", choices=["serial", "ray"])
    parser.add_argument("--embed-batch", type=int, default=64, help="frames per CLIP forward")
    parser.add_argument("--decode-frames", type=int, default=120, help="frames per decode-only measurement")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--workdir", type=Path, default=None, help="where videos and outputs go (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true",
                        help="toy size (one 2 s 360p video, a 2-block CLIP); the GPU run only where CUDA is visible")
    args = parser.parse_args()
    if args.smoke:
        args.videos, args.seconds, args.sizes, args.decode_frames, args.embed_batch = 1, 2.0, "360p", 24, 8
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    bad = [s for s in sizes if s not in SIZES]
    if bad or not sizes:
        parser.error(f"--sizes: unknown {', '.join(bad) or '(none)'}; accepted: {', '.join(SIZES)}")

    import torch

    if args.smoke and not args.cpu_only and not torch.cuda.is_available():
        print("smoke: no CUDA device is visible here: the GPU run (--gpus 1) is skipped, the CPU run checks the rest")
        args.cpu_only = True
    if not args.cpu_only and not torch.cuda.is_available():
        parser.error("no CUDA device is visible here: run with --cpu-only (e.g. --cpu-only --videos 2 --seconds 4)")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="vfm-curator-gpu-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    videos = make_videos(root / "in", args.videos, args.seconds, sizes)
    made_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = make_clip_model(root / "clip-vit-b16", tiny=args.smoke)
    model_s = time.perf_counter() - t0
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    print(f"{len(videos)} videos x {args.seconds:g} s ({', '.join(sizes)} in turn, 24 fps, H264); "
          f"{os.cpu_count()} CPU cores (load {os.getloadavg()[0]:.1f}); {device}; torch {torch.__version__}; "
          f"runner {args.runner}")
    print(f"(not timed: videos made in {made_s:.1f} s, CLIP {'(2 tiny blocks)' if args.smoke else 'ViT-B/16'} "
          f"built and saved in {model_s:.1f} s)")

    runs = [run("CPU only (--gpus 0)", root / "in", root / "out-cpu", config(model, 0, args.runner, args.embed_batch))]
    if not args.cpu_only:
        runs.append(run("GPU stages (--gpus 1)", root / "in", root / "out-gpu",
                        config(model, 1, args.runner, args.embed_batch)))

    print(f"\n{'run':<24}{'wall s':>8}{'video s':>9}{'video-s/wall-s':>16}{'clips':>7}{'failed':>8}  bound by")
    for r in runs:
        print(f"{r['label']:<24}{r['wall_s']:>8.2f}{r['video_s']:>9.1f}{r['rate']:>16.3f}{r['clips']:>7}"
              f"{r['failures']:>8}  {r['bound']}")
    if args.runner == "serial":  # stages run one after another: leaving one out is subtracting its seconds
        rest = [r["video_s"] / max(1e-9, sum(v for k, v in r["stage_s"].items() if k != "transcode")) for r in runs]
        print("without transcode (video s / seconds of the other stages): "
              + ", ".join(f"{r['label'].split(' (')[0]} {x:.3f}" for r, x in zip(runs, rest))
              + (f"; GPU / CPU {rest[1] / max(rest[0], 1e-9):.2f}x" if len(rest) == 2 else ""))
    if len(runs) == 2:
        print(f"GPU / CPU throughput: {runs[1]['rate'] / max(runs[0]['rate'], 1e-9):.2f}x")
        a, b = runs[0]["spans"], runs[1]["spans"]
        worst = 0
        same_count = set(a) == set(b) and all(len(a[k]) == len(b[k]) for k in a)
        if same_count:
            worst = max((abs(x - y) for k in a for sa, sb in zip(a[k], b[k]) for x, y in zip(sa, sb)), default=0)
        print(f"cuts: {'same number of clips per video' if same_count else 'DIFFERENT clip counts'}"
              + (f", largest boundary difference {worst} frame(s)" if same_count else ""))

    print(f"\n{'stage seconds':<14}" + "".join(f"{r['label'].split(' (')[0]:>22}" for r in runs))
    for stage in STAGES:
        cells = []
        for r in runs:
            total = sum(r["stage_s"].values()) or 1.0
            s = r["stage_s"].get(stage, 0.0)
            cells.append(f"{s:>9.2f} s {100 * s / total:>6.1f} %   ")
        print(f"{stage:<14}" + "".join(f"{c:>22}" for c in cells))

    print(f"\ndecode-only frames/s (first {args.decode_frames} frames of {videos[0].name}; full size, 64 wide)")
    rows = decode_only(videos[0], args.decode_frames)
    for name, full, small in rows:
        print(f"  {name:<10}{full:>10}  {small}")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "cores": os.cpu_count(), "args": vars(args) | {
            "json": str(args.json), "workdir": str(args.workdir)}, "runs": [{k: v for k, v in r.items() if k != "spans"}
                                                                            for r in runs], "decode_only": rows},
                                        indent=1, default=str))


if __name__ == "__main__":
    main()
