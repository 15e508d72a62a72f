"""Shape checks shared by the compressing tokenizers: errors say which shapes are accepted."""

from __future__ import annotations


def video_latent_shape(name: str, shape, channels: int, tc: int, sc: int, latent_channels: int) -> tuple[int, ...]:
    """Latent (C', 1 + (T-1)/tc, H/sc, W/sc) for pixels (C, T, H, W); a leading batch dim is kept.

    A causal tokenizer encodes the first frame alone and then each group of ``tc`` frames, so it
    accepts T = 1 + k*tc frames (T = 1: an image) and sizes divisible by ``sc``.
    """
    if len(shape) not in (4, 5):
        raise ValueError(f"{name} expects a video (B, C, T, H, W) or (C, T, H, W); got shape {tuple(shape)}")
    *batch, c, t, h, w = shape
    if c != channels:
        raise ValueError(f"{name} expects {channels} channels, got {c}")
    if t < 1 or (t - 1) % tc:
        raise ValueError(
            f"{name} with temporal compression {tc} accepts 1 + k*{tc} frames (1, {1 + tc}, {1 + 2 * tc}, ...); got {t}"
        )
    if h % sc or w % sc or h == 0 or w == 0:
        raise ValueError(f"{name} with spatial compression {sc} accepts heights and widths divisible by {sc}; got {h}x{w}")
    return (*batch, latent_channels, 1 + (t - 1) // tc, h // sc, w // sc)


def check_video(name: str, shape, channels: int, tc: int, sc: int, latent_channels: int) -> None:
    """``encode`` takes a batch (B, C, T, H, W) with an accepted T, H, W (``latent_shape`` also takes (C, T, H, W))."""
    if len(shape) != 5:
        raise ValueError(f"{name} encodes a batch of videos (B, C, T, H, W); got shape {tuple(shape)}"
                         + (" (add the batch dimension: video[None])" if len(shape) == 4 else ""))
    video_latent_shape(name, shape, channels, tc, sc, latent_channels)


def check_pixels(name: str, video) -> None:
    """Pixels are a floating-point tensor in [-1, 1]: uint8 frames (as PyAV decodes them) were encoded as
    they were by the tokenizers that cast or only reshape (latents of 0..255, silently), and failed inside
    a convolution in the others."""
    if not video.is_floating_point():
        raise ValueError(f"{name} takes pixels in [-1, 1] as a floating-point tensor; got {video.dtype} "
                         "(frames 0..255: video.float() / 127.5 - 1)")


def check_latent(name: str, shape, latent_channels: int) -> None:
    """A latent must be (B, C', T', H', W') with the tokenizer's channel count."""
    if len(shape) != 5 or shape[1] != latent_channels or min(shape[2:]) < 1:
        raise ValueError(f"{name} decodes latents (B, {latent_channels}, T', H', W') with T', H', W' >= 1; "
                         f"got shape {tuple(shape)}")
