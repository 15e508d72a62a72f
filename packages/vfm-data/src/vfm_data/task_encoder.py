"""The energon task encoder: raw shard entries -> typed samples -> packed or stacked model inputs.

Everything runs through energon's own hooks: a cooker for the crude webdataset, ``encode_sample``,
the packing hooks ``select_samples_to_pack`` / ``pack_selected_samples``, ``batch``, and
``batch_group_criterion`` for bucketed blends.
"""

from __future__ import annotations

import functools
import types
import warnings
from collections import Counter
from typing import Any, Sequence

import torch
from megatron.energon import Cooker, DefaultTaskEncoder, SkipSample, stateless
from megatron.energon.errors import SYSTEM_EXCEPTIONS
from megatron.energon.source_info import get_source_info
from megatron.energon.wrappers import RepeatDataset, ShuffleBufferDataset

from vfm_data.batches import PackedBatch, PackedSample, VideoBatch, pad_text
from vfm_data.blenders import Blender
from vfm_data.blenders.weighted import WeightedBlender
from vfm_data.errors import DataError, DataWarning, one_line, raise_sample_error
from vfm_data.loader_options import OVERLONG_POLICIES, LoaderOptionError, overlong_problem  # noqa: F401 - still importable from here
from vfm_data.packing import crop_to_tokens, grid_positions, patch_grid, patchify, select_packs
from vfm_data.sample import SampleDecoder, VideoSample, shard_of
from vfm_data.skips import MAX_CONSECUTIVE_UNDECODABLE, WARN_INTERVAL_S, SkipLog
from vfm_data.tar_guard import guard_readers

_KEYS_SHOWN = 4  # sample keys named in an error about a batch


def _fatal_to_energon(step):
    """An exception in one of vfm's steps (encode, pack, batch) becomes a :class:`SampleError` naming
    the sample, its shard (energon's source info) and the exception, chained to it. energon prints an
    "Except ..." line for every exception it may hand to an error handler, before the handler runs;
    a ``FatalSampleError`` (which ours is) goes through unprinted, so only our one line shows.
    Skips and the errors energon already treats as fatal (a bug such as NameError, MemoryError, ours)
    pass as they are."""

    @functools.wraps(step)
    def run(self, sample, *args, **kwargs):
        try:
            return step(self, sample, *args, **kwargs)
        except (SkipSample, *SYSTEM_EXCEPTIONS):
            raise
        except Exception as exc:
            raise_sample_error(exc, sample, get_source_info(sample))

    return run


def _bucket_criterion(self: "VideoTaskEncoder", sample: Any) -> tuple[Any, int]:
    return self.blender.bucket(sample)


# energon looks the hook up by function name to see whether a task encoder overrides it
_bucket_criterion.__name__ = "batch_group_criterion"


class VideoTaskEncoder(DefaultTaskEncoder):
    """Turns vfm shards into model inputs.

    Args:
        patch_size: the model's spatial patch size (an integer; vfm-data does not import models).
        temporal_patch: the model's temporal patch size.
        latent_channels: if given, a latent with another channel count is an error naming both.
        max_seq_len: tokens per pack; required when packing.
        overlong: what to do with a sample of more than ``max_seq_len`` tokens: ``"drop"`` (skip
            it, counted and warned) or ``"crop"`` (fewer frames, then fewer rows; counted).
        blender: how datasets are mixed (see :mod:`vfm_data.blenders`); default weighted.
        warn_interval: seconds between two warnings of one skip reason (the first is always shown).
        max_consecutive_undecodable: undecodable samples in a row that stop the loader; a shard or
            a stream with no usable sample stops it earlier (see :mod:`vfm_data.skips`).
    """

    decoder = None  # vfm decodes its own members (no pickle, bad data counted)

    def __init__(
        self,
        *,
        patch_size: int,
        temporal_patch: int = 1,
        latent_channels: int | None = None,
        max_seq_len: int | None = None,
        overlong: str = "drop",
        blender: Blender | None = None,
        warn_interval: float = WARN_INTERVAL_S,
        max_consecutive_undecodable: int = MAX_CONSECUTIVE_UNDECODABLE,
    ) -> None:
        super().__init__()
        if problem := overlong_problem(overlong, "VideoTaskEncoder"):
            raise LoaderOptionError(problem)
        if patch_size < 1 or temporal_patch < 1:
            raise ValueError(f"patch sizes must be >= 1, got patch_size={patch_size}, temporal_patch={temporal_patch}")
        self.patch_size, self.temporal_patch = int(patch_size), int(temporal_patch)
        self.max_seq_len, self.overlong = max_seq_len, overlong
        self.blender = blender or WeightedBlender()
        self.progress_scale = 1  # streams in the job, set by the loader (for scheduled blends)
        self.skips = SkipLog(warn_interval=warn_interval, max_consecutive=max_consecutive_undecodable)
        self.decode = SampleDecoder(latent_channels, self.skips)
        # skipped / dropped / cropped, by reason and by reason@shard (see vfm_data.skips)
        self.counts: Counter[str] = self.skips.counts
        self._crops_warned: set[tuple[str, str]] = set()  # (reason, shard) already named for a crop
        self._readers: list = []  # the guarded tar readers of this stream's datasets
        self.skips.shard_has_decodable = self._shard_has_decodable
        self.cookers = [Cooker(self._cook)]
        if hasattr(self.blender, "frames_bucket"):
            # Only bucketed blends group batches; energon checks whether the hook is overridden.
            self.batch_group_criterion = types.MethodType(_bucket_criterion, self)

    # --- per sample ----------------------------------------------------------------------------

    @stateless
    def _cook(self, raw: dict) -> VideoSample:
        return self.decode(raw)

    @stateless
    @_fatal_to_energon
    def encode_sample(self, sample: VideoSample) -> VideoSample:
        latent = sample.latent
        if hasattr(self.blender, "frames_bucket"):
            frames = self.blender.frames_bucket(latent.shape[1])
            if frames < latent.shape[1]:  # durations the data does not have: frames lost, so counted and named
                durations = list(self.blender.durations)
                image = " (a video made a 1-frame image)" if frames == 1 else ""
                self._crop("duration_crop", sample, f"{latent.shape[1]} latent frames cropped to {frames}{image}, the "
                           f"largest of the bucketed blend's durations {durations} that fits; accepted: durations that "
                           f"include the data's frame counts (add {latent.shape[1]} to keep every frame)")
            latent = latent[:, :frames]
        grid = patch_grid(tuple(latent.shape), self.patch_size, self.temporal_patch)
        tokens = grid[0] * grid[1] * grid[2]
        if self.max_seq_len is not None and tokens > self.max_seq_len:
            if self.overlong == "drop":  # counted, warned at a bounded rate; all dropped ends the loader
                self.skips.skip("overlong_drop", shard=shard_of(sample), key=str(sample.__key__), member="",
                                detail=f"{tokens} tokens > max_seq_len {self.max_seq_len}")
            self.counts["overlong_crop"] += 1
            self.skips.met("overlong_crop", shard=shard_of(sample), key=str(sample.__key__))
            latent = crop_to_tokens(latent, self.max_seq_len, self.patch_size, self.temporal_patch)
            grid = patch_grid(tuple(latent.shape), self.patch_size, self.temporal_patch)
            tokens = grid[0] * grid[1] * grid[2]
        pt, p = self.temporal_patch, self.patch_size
        if latent.shape[2] != grid[1] * p or latent.shape[3] != grid[2] * p:
            # a spatial remainder is never a bucket's choice (vfm train --validate refuses it for the
            # first sample of each folder): the crop is counted and the first one per shard named
            self._crop("patch_remainder_crop", sample, f"latent (H, W) = {tuple(latent.shape[2:])} is not divisible by "
                       f"the patch {p}; cropped to {(grid[1] * p, grid[2] * p)} (write such clips to a bucket the patch divides)")
        sample.latent = latent[:, : grid[0] * pt, : grid[1] * p, : grid[2] * p]
        sample.grid, sample.num_tokens = grid, tokens
        self.skips.used()
        return sample

    def _crop(self, reason: str, sample: VideoSample, what: str) -> None:
        """Count a crop (the sample is used); the first of each reason per shard is a warning naming it."""
        shard = shard_of(sample)
        self.counts[reason] += 1
        self.skips.met(reason, shard=shard, key=str(sample.__key__))
        if (reason, shard) not in self._crops_warned:
            self._crops_warned.add((reason, shard))
            warnings.warn(one_line(f"vfm_data: {shard} sample {sample.__key__}: {what}; further {reason}s in this shard "
                                   f"are counted (loader.counts[{reason!r}])"), DataWarning, stacklevel=3)

    def build_cook_crude_sample(self, dataset, **kwargs):
        # Every crude dataset (each of a blend) is cooked here: guard its tar readers first, so a
        # damaged tar gives counted skips or an error naming the shard (vfm_data.tar_guard).
        self._readers += guard_readers(dataset, self.skips)
        return super().build_cook_crude_sample(dataset, **kwargs)

    def _shard_has_decodable(self, shard: str) -> bool:
        """Read the whole shard once (only when this stream's part of it was all undecodable)."""
        probe = SampleDecoder(self.decode.latent_channels, SkipLog(warn=False))
        for reader in self._readers:
            for raw in reader.samples_of(shard):
                try:
                    probe(raw)
                    return True
                except SkipSample:
                    continue
        return False

    # --- packing (energon's hooks) -------------------------------------------------------------

    @_fatal_to_energon
    def select_samples_to_pack(self, samples: list[VideoSample]) -> list[list[VideoSample]]:
        packs = select_packs([s.num_tokens for s in samples], self._capacity())
        return [[samples[i] for i in pack] for pack in packs]

    @stateless
    @_fatal_to_energon
    def pack_selected_samples(self, samples: list[VideoSample]) -> PackedSample:
        patches = [patchify(s.latent, self.patch_size, self.temporal_patch) for s in samples]
        return PackedSample(
            __key__="+".join(s.__key__ for s in samples),
            __restore_key__=(),
            patches=torch.cat(patches),
            positions=torch.cat([grid_positions(s.grid) for s in samples]),
            seqlens=[s.num_tokens for s in samples],
            grids=[s.grid for s in samples],
            texts=[s.text for s in samples],
            text_lengths=[s.text_length for s in samples],
            keys=[s.__key__ for s in samples],
            metas=[s.meta for s in samples],
            nbytes=sum(s.nbytes for s in samples),
        )

    def _capacity(self) -> int:
        if self.max_seq_len is None:
            raise ValueError("packing needs max_seq_len")
        return self.max_seq_len

    # --- batching ------------------------------------------------------------------------------

    @stateless
    @_fatal_to_energon
    def batch(self, samples: list[Any]) -> PackedBatch | VideoBatch:
        if isinstance(samples[0], PackedSample):
            return PackedBatch.from_packs(samples, self._capacity())
        shapes = {tuple(s.latent.shape) for s in samples}
        if len(shapes) > 1:
            # a DataError is fatal to energon: no "Except ..." line printed ahead of this one
            keys = ", ".join(repr(str(k)) for k in dict.fromkeys(s.__key__ for s in samples[:_KEYS_SHOWN]))
            shards = list(dict.fromkeys(shard_of(s) for s in samples))
            of = f"shard{'s' if len(shards) > 1 else ''} {', '.join(shards)}"
            raise DataError(
                f"vfm_data: cannot stack latents of shapes {sorted(shapes)} into one batch of {len(samples)} (samples "
                f"{keys}{', ...' if len(samples) > _KEYS_SHOWN else ''} of {of}): without packing, the samples "
                "of a batch must have one shape; accepted: packing (max_seq_len + packing_buffer), a bucketed blend "
                "or batch_size=1"
            )
        text, mask = pad_text([s.text for s in samples], [s.text_length for s in samples])
        keys = [s.__key__ for s in samples]
        return VideoBatch(
            __key__=keys, __restore_key__=(),
            latents=torch.stack([s.latent for s in samples]),
            text=text, text_mask=mask, keys=keys,
            metas=[s.meta for s in samples], nbytes=sum(s.nbytes for s in samples),
        )

    # --- blending: energon's recipe with the blender choosing how datasets are mixed -----------

    def build_train_datasets(self, *, datasets, worker_config, batch_size, batch_drop_last=False,
                             packing_buffer_size=None, virtual_epoch_length=0, shuffle_buffer_size=None,
                             blend_mode=None, repeat=True):
        if isinstance(self.blender, WeightedBlender) and not hasattr(self.blender, "frames_bucket"):
            return super().build_train_datasets(
                datasets=datasets, worker_config=worker_config, batch_size=batch_size,
                batch_drop_last=batch_drop_last, packing_buffer_size=packing_buffer_size,
                virtual_epoch_length=virtual_epoch_length, shuffle_buffer_size=shuffle_buffer_size,
                blend_mode=blend_mode, repeat=repeat,
            )
        inner = self._inner_datasets(datasets, worker_config)
        shuffle = shuffle_buffer_size is not None and shuffle_buffer_size > 1
        # A mix that changes over training (scheduled) must be drawn as samples come out: a shuffle
        # after the blend would hold each draw back ~shuffle_buffer_size samples per stream and smear
        # a milestone over several times that. Shuffle each dataset before it instead (the same
        # buffer memory in all); a fixed-weight blend keeps energon's order.
        before = shuffle and not isinstance(self.blender, WeightedBlender)
        if before:
            size = max(2, -(-shuffle_buffer_size // len(inner)))
            inner = [(ShuffleBufferDataset(d, size=size, worker_config=worker_config), w) for d, w in inner]
        dataset = self.blender.blend(inner, worker_config=worker_config, progress_scale=self.progress_scale)
        if shuffle and not before:
            dataset = ShuffleBufferDataset(dataset, size=shuffle_buffer_size, worker_config=worker_config)
        dataset = self.build_encode_sample(dataset, worker_config=worker_config)
        return self.build_batch(
            dataset, batch_size=batch_size, batch_drop_last=batch_drop_last,
            packing_buffer_size=packing_buffer_size, worker_config=worker_config,
        )

    def _inner_datasets(self, datasets: Sequence[Any], worker_config) -> list[tuple[Any, float]]:
        """Each (repeating) dataset with its metadataset weight, rotated across workers as energon does."""
        global_workers = max(1, worker_config.num_workers) * worker_config.world_size
        offset, inner = 0, []
        for d in datasets:
            ds = RepeatDataset(self._load_dataset(d, offset % global_workers, worker_config), worker_config=worker_config)
            inner.append((ds, 1.0 if d.weight is None else float(d.weight)))
            offset += len(d.dataset)
        return inner
