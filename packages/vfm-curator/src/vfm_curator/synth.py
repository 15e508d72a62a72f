"""Synthetic test videos with known shot boundaries, written as real H264 files with PyAV.

Each shot is a smooth colour pattern, with its own random palette, drifting slowly (so frames
inside a shot differ a little and frames across a cut differ a lot). Used by the tests, the
benchmarks and the end-to-end demo; no data set has to be downloaded.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
from vfm_plugins.files import fresh_file
from vfm_plugins.x264 import x264_options


def shot_frames(num_frames: int, width: int, height: int, rng: np.random.Generator, speed: float = 1.0):
    """Yield (height, width, 3) uint8 frames of one shot."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    colours = rng.uniform(0, 255, size=(3, 3)).astype(np.float32)  # three palette colours
    freqs = rng.uniform(0.5, 3.0, size=(2, 2)) * 2 * np.pi / np.array([width, height])
    phase = rng.uniform(0, 2 * np.pi, size=2)
    direction = rng.normal(size=2)
    direction /= np.linalg.norm(direction) + 1e-9
    for t in range(num_frames):
        dx, dy = direction * speed * t
        a = 0.5 + 0.5 * np.sin(freqs[0, 0] * (x + dx) + freqs[0, 1] * (y + dy) + phase[0])
        b = 0.5 + 0.5 * np.cos(freqs[1, 0] * (x - dy) + freqs[1, 1] * (y + dx) + phase[1])
        img = colours[0] * a[..., None] + colours[1] * (1 - a[..., None]) * b[..., None] + colours[2] * (1 - b[..., None]) * 0.5
        yield np.clip(img, 0, 255).astype(np.uint8)


def make_video(
    path: str | Path,
    shot_lengths: list[int],
    *,
    width: int = 96,
    height: int = 64,
    fps: float = 24.0,
    seed: int = 0,
    rotation: int = 0,
    vfr: bool = False,
    audio: bool = False,
    same_shot_after: set[int] | frozenset = frozenset(),
    speed: float = 1.0,
) -> list[int]:
    """Write an H264 mp4 of consecutive shots and return the cut frames (first frame of each shot
    but the first). ``same_shot_after`` = shot indices whose *next* shot continues the same scene
    (same palette and motion, no visual cut): a fake boundary. ``rotation`` sets the display
    matrix; ``vfr`` alternates frame durations; ``audio`` adds an AAC sine track; ``speed`` is the
    pattern's drift in pixels per frame (0: a still picture)."""
    rng = np.random.default_rng(seed)
    cuts, index = [], 0
    frames: list[np.ndarray] = []
    k = 0
    while k < len(shot_lengths):
        # a run of shots joined by fake boundaries is one continuous scene
        run = [shot_lengths[k]]
        while k in same_shot_after and k + 1 < len(shot_lengths):
            k += 1
            run.append(shot_lengths[k])
        shot_rng = np.random.default_rng(rng.integers(1 << 31))
        frames.extend(shot_frames(sum(run), width, height, shot_rng, speed))
        for length in run:
            if index > 0:
                cuts.append(index)
            index += length
        k += 1
    write_video(path, frames, fps=fps, rotation=rotation, vfr=vfr, audio=audio)
    return cuts


def write_video(
    path: str | Path,
    frames: list[np.ndarray],
    *,
    fps: float = 24.0,
    rotation: int = 0,
    vfr: bool = False,
    audio: bool = False,
    codec: str = "libx264",
    pix_fmt: str | None = None,
    options: dict | None = None,
    colorspace: int | None = None,
    color_range: int | None = None,
) -> None:
    """Encode (height, width, 3) uint8 frames as an H264 mp4 (see :func:`make_video` for options).
    ``pix_fmt`` (default: yuv420p, yuv444p at odd sizes), the encoder's ``options`` (default: crf 18,
    ultrafast), and the colour tags written in the stream (``colorspace``: 1 = BT.709, 6 = BT.601;
    ``color_range``: 1 = limited, 2 = full) let tests make the files a decoder must get right."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames[0].shape[:2]
    # written new and renamed: a link planted at path (a folder from elsewhere) is replaced, not written through;
    # the suffix tells PyAV the container
    with fresh_file(path, prefix=f".{path.stem}.partial.", suffix=path.suffix) as tmp:
        container = av.open(str(tmp), "w")
        rate = Fraction(fps).limit_denominator(1001)
        stream = container.add_stream(codec, rate=rate)
        # 4:2:0 needs even sides; odd-sized test videos are written in 4:4:4 (High 4:4:4 profile)
        stream.width, stream.height = width, height
        stream.pix_fmt = pix_fmt or ("yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p")
        stream.options = {"crf": "18", "preset": "ultrafast"} if options is None else options
        if codec == "libx264":  # the same frames, the same bytes (vfm_plugins.x264)
            stream.options = x264_options(stream.options)
        if colorspace is not None:
            stream.codec_context.colorspace = colorspace
        if color_range is not None:
            stream.codec_context.color_range = color_range
        time_base = Fraction(1, 1000) if vfr else 1 / rate
        stream.codec_context.time_base = time_base
        if rotation:
            stream.set_display_rotation(rotation)
        astream = container.add_stream("aac", rate=16000) if audio else None
        pts = 0
        for i, img in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts, frame.time_base = pts, time_base
            pts += (round(1000 / fps * (0.6 if i % 2 else 1.4)) if vfr else 1)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if astream is not None:
            _write_sine(container, astream, seconds=len(frames) / fps)
        container.close()


def _write_sine(container, stream, seconds: float) -> None:
    import av

    rate = stream.rate
    samples = np.sin(2 * np.pi * 440 * np.arange(int(rate * seconds)) / rate).astype(np.float32)
    for start in range(0, len(samples), 1024):
        chunk = samples[start : start + 1024]
        if len(chunk) < 1024:
            chunk = np.pad(chunk, (0, 1024 - len(chunk)))
        frame = av.AudioFrame.from_ndarray(chunk[None, :], format="fltp", layout="mono")
        frame.sample_rate = rate
        frame.pts = start
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def make_audio_only(path: str | Path, seconds: float = 1.0) -> None:
    import av

    container = av.open(str(path), "w")
    stream = container.add_stream("aac", rate=16000)
    _write_sine(container, stream, seconds)
    container.close()


COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 190, 70),
    "blue": (50, 80, 230),
    "yellow": (235, 215, 50),
    "white": (245, 245, 245),
}
DIRECTIONS = {"right": (1, 0), "left": (-1, 0), "down": (0, 1), "up": (0, -1)}
# Backgrounds of clearly different hues and brightness, so that every change of background is a
# hard cut for the content detector while the bright shapes still stand out.
BACKGROUNDS = ((30, 40, 160), (30, 130, 50), (150, 30, 50), (120, 40, 160), (30, 140, 140), (140, 140, 30))


def shape_frames(
    num_frames: int,
    *,
    shape: str,
    colour: str,
    direction: str,
    background: tuple[int, int, int],
    width: int = 64,
    height: int = 64,
    size: int = 14,
) -> list[np.ndarray]:
    """A ``colour`` circle or square crossing a plain ``background`` towards ``direction``: the
    kind of clip a caption can describe exactly ("a red circle moving right")."""
    if shape not in ("circle", "square"):
        raise ValueError(f"shape must be 'circle' or 'square', got {shape!r}")
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    dx, dy = DIRECTIONS[direction]
    frames = []
    for t in range(num_frames):
        progress = t / max(num_frames - 1, 1)  # 0 -> 1 across the shot
        cx = width / 2 + dx * (progress - 0.5) * (width - size)
        cy = height / 2 + dy * (progress - 0.5) * (height - size)
        if shape == "circle":
            inside = (x - cx) ** 2 + (y - cy) ** 2 <= (size / 2) ** 2
        else:
            inside = (np.abs(x - cx) <= size / 2) & (np.abs(y - cy) <= size / 2)
        img = np.empty((height, width, 3), np.uint8)
        img[:] = background
        img[inside] = COLOURS[colour]
        frames.append(img)
    return frames


def make_shapes_video(
    path: str | Path,
    *,
    shape: str,
    colour: str,
    direction: str,
    shots: int = 3,
    frames_per_shot: int = 24,
    width: int = 64,
    height: int = 64,
    fps: float = 24.0,
    seed: int = 0,
) -> str:
    """Write ``shots`` shots of the same moving shape, each on a new background colour (so every
    shot boundary is a hard cut), and return the caption that describes the video."""
    order = np.random.default_rng(seed).permutation(len(BACKGROUNDS))
    frames: list[np.ndarray] = []
    for shot in range(shots):
        background = BACKGROUNDS[order[shot % len(order)]]
        frames += shape_frames(
            frames_per_shot, shape=shape, colour=colour, direction=direction,
            background=background, width=width, height=height,
        )
    write_video(path, frames, fps=fps)
    return f"a {colour} {shape} moving {direction}"
