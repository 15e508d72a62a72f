"""The decode stage's per-frame maths in torch, on the device the frames are on (a GPU decoder's
CUDA tensors stay on the GPU; CPU tensors work the same way).

:class:`TorchFrameScorer` is :class:`vfm_curator.shot_detectors.content.FrameScorer` with the same
interface and the same numbers: the HSV content change (shot detection) and the grey-frame motion
score, optionally after resizing each frame on the device to the small detection size.
:func:`rgb_to_hsv` is :func:`vfm_curator.colour.rgb_to_hsv` op for op in float32.
"""

from __future__ import annotations

import numpy as np

#: at most this many pixels of full-size frames are resized at once (float32: ~400 MB for 2**25 RGB pixels)
_CHUNK_PIXELS = 2**25


def rgb_to_hsv(frames):
    """(..., 3) uint8 RGB tensor -> (..., 3) float32 HSV on OpenCV's scales (H/2 in [0, 180), S, V
    in [0, 255]), the same operations as the numpy reference, on ``frames.device``."""
    import torch

    rgb = frames.to(torch.float32) / 255.0
    r, g, b = rgb.unbind(-1)
    v = rgb.amax(dim=-1)
    mn = rgb.amin(dim=-1)
    delta = v - mn
    zero = torch.zeros((), dtype=torch.float32, device=rgb.device)
    s = torch.where(v > 0, delta / v.clamp_min(1e-12), zero)
    safe = delta.clamp_min(1e-12)
    h = torch.where(v == r, (g - b) / safe, torch.where(v == g, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe))
    h = torch.where(delta > 0, torch.remainder(h * 60.0, 360.0), zero)
    return torch.stack([h / 2.0, s * 255.0, v * 255.0], dim=-1)


def resize_frames(frames, size: tuple[int, int]):
    """(N, H, W, 3) uint8 -> (N, h, w, 3) uint8 at ``size = (w, h)``, rounded back to uint8, on the
    device, with the filter FFmpeg uses for that size (:func:`vfm_curator.decoders.yuv.resize_planes`):
    an area average for the detection sizes, bilinear with antialiasing otherwise."""
    import torch

    from vfm_curator.decoders.yuv import resize_planes
    from vfm_curator.io.video import is_detection_shrink

    w, h = int(size[0]), int(size[1])
    if frames.shape[1:3] == (h, w):
        return frames
    x = frames.permute(0, 3, 1, 2).to(torch.float32)  # (N, 3, H, W)
    x = resize_planes(x, h, w, area=is_detection_shrink(frames.shape[2], frames.shape[1], w, h))
    return x.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


class TorchFrameScorer:
    """``push(frame)`` takes one (H, W, 3) uint8 RGB frame (a torch tensor on any device, or a numpy
    array), ``push_batch(frames)`` an (N, H, W, 3) batch of consecutive frames; afterwards
    :attr:`content` and :attr:`motion` are the same (T,) float32 numpy arrays as
    :class:`~vfm_curator.shot_detectors.content.FrameScorer`'s (within float32 summation order:
    1e-4 relative). Frames must be upright (rotation applied).

    ``size = (w, h)`` resizes every frame on its device first (:func:`resize_frames`); ``None``
    scores frames as given. The scores stay on the device until read (no sync per frame); only the
    previous frame's HSV and grey image are held.
    """

    def __init__(self, size: tuple[int, int] | None = None) -> None:
        if size is not None:
            w, h = size
            if isinstance(w, bool) or isinstance(h, bool) or int(w) < 1 or int(h) < 1 or int(w) != w or int(h) != h:
                raise ValueError(f"TorchFrameScorer: size must be (width, height) positive integers, got {size!r}")
        self.size = None if size is None else (int(size[0]), int(size[1]))
        self._hsv = None  # (h, w, 3) float32 of the last frame
        self._grey = None  # (h, w) float32
        self._parts: list = []  # (k, 2) float32 tensors on the device: content, motion
        self._host: list[np.ndarray] = []  # parts already copied to the host

    def push(self, frame) -> None:
        self.push_batch(_as_tensor(frame)[None])

    def push_batch(self, frames) -> None:
        import torch

        frames = _as_tensor(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != torch.uint8:
            raise ValueError(f"TorchFrameScorer: expected (N, H, W, 3) uint8 RGB frames, got {tuple(frames.shape)} "
                             f"{frames.dtype}")
        if len(frames) == 0:
            return
        step = max(1, _CHUNK_PIXELS // max(1, frames.shape[1] * frames.shape[2]))
        with torch.inference_mode():
            for i in range(0, len(frames), step):
                self._score(frames[i : i + step])

    def _score(self, frames) -> None:
        import torch

        if self.size is not None:
            frames = resize_frames(frames, self.size)
        hsv = rgb_to_hsv(frames)  # (n, h, w, 3)
        grey = frames.to(torch.float32).mean(dim=-1)  # (n, h, w)
        n = len(frames)
        scores = torch.zeros((n, 2), dtype=torch.float32, device=frames.device)
        if self._hsv is not None and self._hsv.shape == hsv.shape[1:]:
            prev_hsv, prev_grey = torch.cat([self._hsv[None], hsv[:-1]]), torch.cat([self._grey[None], grey[:-1]])
            first = 0
        else:  # the first frame (or a size change) scores 0, as the numpy scorer does
            prev_hsv, prev_grey, first = hsv[:-1], grey[:-1], 1
        if len(prev_hsv):
            d = (hsv[first:] - prev_hsv).abs_()  # (n', h, w, 3)
            d[..., 0] = torch.minimum(d[..., 0], 180.0 - d[..., 0])  # hue on its circle
            scores[first:, 0] = d.mean(dim=(1, 2)).mean(dim=-1)
            scores[first:, 1] = (grey[first:] - prev_grey).abs_().mean(dim=(1, 2)) / 255.0
        self._hsv, self._grey = hsv[-1].clone(), grey[-1].clone()
        self._parts.append(scores)
        if len(self._parts) >= 256:  # keep few small device tensors alive
            self._parts = [torch.cat(self._parts)]

    def _scores(self) -> np.ndarray:
        import torch

        if self._parts:
            self._host.append(torch.cat(self._parts).cpu().numpy())
            self._parts = []
        return np.concatenate(self._host) if self._host else np.zeros((0, 2), np.float32)

    @property
    def content(self) -> np.ndarray:
        return np.ascontiguousarray(self._scores()[:, 0], dtype=np.float32)

    @property
    def motion(self) -> np.ndarray:
        return np.ascontiguousarray(self._scores()[:, 1], dtype=np.float32)


def _as_tensor(frames):
    import torch

    if isinstance(frames, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(frames))
    if not isinstance(frames, torch.Tensor):
        raise TypeError(f"TorchFrameScorer: frames must be a torch tensor or a numpy array, got {type(frames).__name__}")
    return frames
