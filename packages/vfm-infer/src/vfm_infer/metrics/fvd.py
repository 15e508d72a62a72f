"""``fvd``: Fréchet Video Distance of the generated videos to a folder of real videos (Unterthiner et al. 2018).

Features are the Kinetics-400 I3D's 400 logits (what google-research/frechet_video_distance takes from
the TF-Hub module, and StyleGAN-V's port), one vector per video, from a clip made as that code makes it:

- the first ``frames`` (16) consecutive frames; a shorter video is stretched to 16 by repeating frames
  (frame ``floor(i * T / 16)``), and the notes count those;
- each whole frame resized to ``size`` x ``size`` (224) bilinearly, without keeping the aspect ratio and
  without antialiasing, on the grid of TF1's ``tf.image.resize_bilinear`` that the reference calls
  (:func:`tf1_resize_bilinear`: not torch's half-pixel grid);
- values scaled from [0, 255] to [-1, 1].

FVD is then the Fréchet distance (:mod:`.frechet`, float64) between Gaussians fitted to the two sets
of features. The reference statistics are cached (:mod:`.fvd_reference`), keyed by the reference
files, the weights and these settings.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from vfm_infer.metrics.base import EvalItem, Metric, MetricResult, MetricWarning
from vfm_infer.metrics.frechet import GaussianStats, frechet_between

WEIGHTS_ACCEPTED = ("a local .safetensors file of the Kinetics-400 I3D (pytorch-i3d's rgb_imagenet.pt converted with "
                    "torch.load(weights_only=True) + safetensors.torch.save_file; see vfm_infer.metrics.i3d.load_weights)")


class SmallSampleWarning(MetricWarning):
    """Fewer videos than feature dimensions + 1: the covariance is singular and FVD biased by the set sizes."""


def clip_frame_indices(count: int, frames: int) -> np.ndarray:
    """The first ``frames`` frames of a ``count``-frame video; a shorter one repeats frames evenly."""
    if count >= frames:
        return np.arange(frames)
    return np.floor(np.arange(frames) * count / frames).astype(int)


def tf1_resize_bilinear(x, size: tuple[int, int]):
    """(N, C, H, W) float -> (N, C, *size), as TF1's ``tf.image.resize_bilinear`` with its defaults
    (align_corners and half_pixel_centers False): output pixel i samples input ``i * in / out``, its
    lower neighbour weighted by 1 - the fraction, the upper one clamped to the last pixel. torch's
    ``align_corners=False`` samples ``(i + 0.5) * in / out - 0.5`` instead: a shift of a fraction of a
    pixel on every clip, so other features than the reference FVD's."""
    import torch

    def axis(n_in: int, n_out: int):
        source = torch.arange(n_out, dtype=torch.float32) * (n_in / n_out)
        lower = source.floor().long().clamp(max=n_in - 1)
        return lower, (lower + 1).clamp(max=n_in - 1), (source - lower).to(x.device)

    top, bottom, dy = axis(x.shape[-2], size[0])
    left, right, dx = axis(x.shape[-1], size[1])
    # TF's order: along each row first, then between the two rows
    across = x[..., left] + (x[..., right] - x[..., left]) * dx  # (N, C, H, size[1])
    return across[..., top, :] + (across[..., bottom, :] - across[..., top, :]) * dy[:, None]


def i3d_clip(video: np.ndarray, frames: int, size: int):
    """(T, H, W, 3) uint8 -> (3, frames, size, size) float32 in [-1, 1], the network's input."""
    import torch

    picked = torch.from_numpy(np.ascontiguousarray(video[clip_frame_indices(len(video), frames)]))
    x = picked.permute(0, 3, 1, 2).float()  # (T, 3, H, W)
    if tuple(x.shape[-2:]) != (size, size):
        # clamped: a + (b - a) * w in float32 can pass 255 by an ulp
        x = tf1_resize_bilinear(x, (size, size)).clamp(0, 255)
    return (2 * x / 255 - 1).permute(1, 0, 2, 3)  # (3, T, size, size); TF FVD's 2x/255 - 1: 255 maps to 1.0 exactly


class FrechetVideoDistance(Metric):
    """FVD of the whole set of generated videos against the real videos of ``reference``.

    Options: ``reference`` (required: a folder of real videos, searched recursively), ``weights``
    (required: the I3D's .safetensors), ``frames`` (16), ``size`` (224), ``batch_size`` (clips per
    forward pass, 8), ``device`` (``auto``: CUDA when present), ``cache_dir`` (where the reference
    statistics are cached; default ``$XDG_CACHE_HOME/vfm/fvd``, i.e. ``~/.cache/vfm/fvd``).
    """

    name = "fvd"

    def __init__(self, reference: str | None = None, weights: str | None = None, frames: int = 16, size: int = 224,
                 batch_size: int = 8, device: str = "auto", cache_dir: str | None = None) -> None:
        from vfm_infer.metrics.fvd_reference import default_cache_dir, reference_videos
        from vfm_infer.metrics.i3d import network_for

        if reference is None or str(reference) == "":
            raise ValueError("metric 'fvd' needs the option reference: a folder of real videos, any container PyAV reads "
                             "(--option fvd.reference=DIR)")
        if weights is None or str(weights) == "":
            raise ValueError(f"metric 'fvd' needs the option weights: {WEIGHTS_ACCEPTED} (--option fvd.weights=PATH)")
        for key, value, lo in (("frames", frames, 1), ("size", size, 1), ("batch_size", batch_size, 1)):
            # the network takes any clip ("same" padding; a side under the last pool's window is pooled whole);
            # published FVDs are at 224 (the TF-Hub module's only size) and mostly 16 frames
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ValueError(f"fvd.{key} = {value!r}; accepted: an integer >= {lo}")
        if not isinstance(device, str) or not (device in ("auto", "cpu") or device.startswith("cuda")):
            raise ValueError(f"fvd.device = {device!r}; accepted: auto, cpu, cuda, cuda:N")
        self.reference = Path(str(reference)).expanduser()
        self.videos = reference_videos(self.reference)  # before any generated video is read: a typo fails at once
        self.weights = Path(str(weights)).expanduser()
        network_for(self.weights)  # keys and shapes from the header
        self.frames, self.size, self.batch_size, self.device_name = frames, size, batch_size, device
        self.cache_dir = Path(str(cache_dir)).expanduser() if cache_dir else default_cache_dir()
        self.network = None

    def _network(self):
        import torch

        from vfm_infer.metrics.i3d import load_weights

        if self.network is None:
            device = self.device_name
            if device == "auto":
                device = "cuda" if torch.cuda.is_available() else "cpu"
            self.device = torch.device(device)
            self.network = load_weights(self.weights).to(self.device)
        return self.network

    def features(self, videos) -> np.ndarray:
        """(N, classes) float64 logits of an iterable of (T, H, W, 3) uint8 videos, ``batch_size`` clips at a time."""
        import torch

        network, out, batch = self._network(), [], []

        def run() -> None:
            with torch.inference_mode():
                out.append(network(torch.stack(batch).to(self.device)).double().cpu().numpy())
            batch.clear()

        for video in videos:
            batch.append(i3d_clip(video, self.frames, self.size))
            if len(batch) == self.batch_size:
                run()
        if batch:
            run()
        return np.concatenate(out)

    def reference_stats(self) -> tuple[GaussianStats, str]:
        """The reference set's statistics, from the cache when its key matches; and a note saying which."""
        from vfm_infer.metrics import fvd_reference as ref
        from vfm_infer.metrics.file_digests import file_digest

        settings = {"frames": self.frames, "size": self.size, "features": "logits"}
        content = ref.content_digest(self.videos, self.reference, self.cache_dir)
        key = ref.cache_key(content, file_digest(self.weights), settings)
        path = ref.cache_path(self.cache_dir, self.reference, content, key)
        stats = ref.read_cached(path, key)
        if stats is not None:
            return stats, f"reference statistics of {stats.count} videos read from the cache {path}"
        if len(self.videos) < 2:
            raise ValueError(f"fvd.reference = {str(self.reference)!r} holds {len(self.videos)} video; FVD needs at least 2 "
                             "on each side (and more than the 400 feature dimensions for a full-rank covariance)")
        stats = GaussianStats.of(self.features(ref.first_frames(p, self.frames) for p in self.videos))
        ref.write_cached(path, key, stats)
        ref.remove_other_contents(self.cache_dir, self.reference, content)
        return stats, f"reference statistics of {stats.count} videos computed and cached at {path}"

    def evaluate(self, items: Sequence[EvalItem]) -> MetricResult:
        if len(items) < 2:
            raise ValueError(f"fvd needs at least 2 generated videos (a covariance of one is undefined); got {len(items)}")
        reference, cache_note = self.reference_stats()
        generated = GaussianStats.of(self.features(item.frames for item in items))
        notes = [cache_note]
        short = sum(len(item.frames) < self.frames for item in items)
        if short:
            notes.append(f"{short} of {len(items)} generated videos have fewer than {self.frames} frames: each was "
                         f"stretched to {self.frames} by repeating frames")
        dims = generated.mu.shape[0]
        fewest = min(generated.count, reference.count)
        if fewest < dims + 1:
            message = (f"FVD from {generated.count} generated and {reference.count} reference videos: a covariance of "
                       f"{dims} features is singular below {dims + 1} videos, so this FVD is biased by the set sizes; "
                       f"compare only runs of equal counts, and use at least {dims + 1} videos on each side (2048 is customary)")
            notes.append(message)
            warnings.warn(message, SmallSampleWarning, stacklevel=2)
        summary = {"fvd": frechet_between(generated, reference), "videos": generated.count,
                   "reference_videos": reference.count, "feature_dims": dims}
        return MetricResult([], summary, notes)
