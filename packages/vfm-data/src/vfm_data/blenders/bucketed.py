"""A bucketed blend: every batch holds samples of one resolution and duration bucket.

Datasets are blended by weight (energon's blend); samples are then grouped by energon's
``batch_group_criterion`` into buckets keyed by (frames bucket, height, width) of the latent.
``durations`` are the allowed latent frame counts: a sample is cropped to the largest one that fits
(images: 1). The batch size of a bucket is ``tokens_per_batch // tokens per sample`` (at least 1),
or ``batch_size`` when no token budget is given, so large videos come in smaller batches.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from vfm_data.blenders.options import positive_int, positive_ints
from vfm_data.blenders.weighted import WeightedBlender

_DURATIONS = "a non-empty list of latent frame counts, whole numbers >= 1, e.g. [1, 4, 8] (1 is always added: images)"


class BucketedBlender(WeightedBlender):
    def __init__(
        self,
        durations: Sequence[int] = (1,),
        *,
        tokens_per_batch: int | None = None,
        batch_size: int | None = None,
    ) -> None:
        if (tokens_per_batch is None) == (batch_size is None):
            raise ValueError("give exactly one of tokens_per_batch or batch_size for a bucketed blend")
        self.durations = sorted(set(positive_ints("bucketed", "durations", durations, _DURATIONS)) | {1})
        self.tokens_per_batch = None if tokens_per_batch is None else positive_int(
            "bucketed", "tokens_per_batch", tokens_per_batch, "a whole number of patch tokens per batch >= 1")
        self.batch_size = None if batch_size is None else positive_int(
            "bucketed", "batch_size", batch_size, "a whole number of samples per batch >= 1")

    def frames_bucket(self, frames: int) -> int:
        return max(d for d in self.durations if d <= frames)

    def bucket(self, sample: Any) -> tuple[Hashable, int]:
        t, h, w = sample.latent.shape[1:]
        key = (self.frames_bucket(t), h, w)
        if self.tokens_per_batch is not None:
            return key, max(1, self.tokens_per_batch // max(1, sample.num_tokens))
        return key, int(self.batch_size)  # type: ignore[arg-type]
