"""The configured buckets checked against the tokenizer before any work, and the patch tokens a
sample of each bucket holds (the summary's token counts)."""

from __future__ import annotations

from vfm_curator.pipelines.shard_config import ShardConfig
from vfm_curator.stages.shard_decode import Bucket, check_buckets


def _check_buckets(config: ShardConfig):
    """Check every bucket shape against the tokenizer (clear errors before any work); returns the
    tokenizer, which :func:`_tokens_per_sample` then uses for the summary."""
    import vfm_models
    from vfm_plugins import PluginError

    from vfm_curator.stages.shard_tokenize import build_tokenizer

    check_buckets(config.resolutions, config.frames, config.frame_stride)
    vfm_models.get_text_encoder(config.text_encoder)  # an unknown name lists the available ones
    try:
        tokenizer = build_tokenizer(config.tokenizer, config.tokenizer_options)
    except TypeError as exc:  # an option of the wrong type ('2' for 2): one line, as the text encoder's setup says it
        if isinstance(exc, PluginError):  # an unknown option: already one line naming the accepted ones
            raise
        raise ValueError(f"tokenizer {config.tokenizer!r} could not be built from tokenizer_options "
                         f"{dict(config.tokenizer_options)!r}: TypeError: {exc}") from exc
    for h, w in config.resolutions:
        for t in [1, *config.frames]:
            _tokens_per_sample(tokenizer, Bucket(int(h), int(w), int(t)), config)
    return tokenizer


def _tokens_per_sample(tokenizer, bucket: Bucket, config: ShardConfig) -> int:
    from vfm_data.packing import patch_grid

    try:
        shape = tokenizer.latent_shape((3, bucket.frames, bucket.height, bucket.width))
    except ValueError as exc:
        raise ValueError(f"bucket {bucket.name} (H x W x frames) does not fit tokenizer {config.tokenizer!r}: {exc}") from exc
    grid = patch_grid(tuple(shape), config.patch_size, config.temporal_patch)
    return grid[0] * grid[1] * grid[2]
