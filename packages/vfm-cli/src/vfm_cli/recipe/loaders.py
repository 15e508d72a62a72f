"""The trainer's loader for this rank: synthetic blobs, or vfm-data's resumable loader as trainer
micro-batches (dense ``{"x0", "cond"}`` or packed ``{"x0s", "cond", "num_tokens"}``, see
:mod:`vfm_parallel.trainer.batches`)."""

from __future__ import annotations

from typing import Any

import torch
from vfm_parallel.trainer import RunContext
from vfm_parallel.trainer.batches import unpack
from vfm_parallel.trainer.config import TrainConfig

from vfm_cli.recipe.resolution import Resolved


def synthetic_loader(cfg: TrainConfig, ctx: RunContext, labelled: bool = True):
    """Class-conditional blobs (``data.source = "synthetic"``), this rank's share of them; without their
    labels for a model that reads none (``labelled`` False: an unconditional one, which would warn that
    it ignores them)."""
    from vfm_parallel.trainer.synthetic import SyntheticLoader, make_blobs

    d = cfg.data
    latents, labels = make_blobs(d.num_samples, tuple(d.latent_shape), d.num_classes)
    return SyntheticLoader(latents, labels if labelled else None, d.micro_batch, ctx.coords.dp_rank, ctx.coords.dp_size)


class ShardBatches:
    """vfm-data's resumable loader, giving the trainer dense ``{"x0", "cond"}`` or packed
    ``{"x0s", "cond", "num_tokens"}`` micro-batches (see :mod:`vfm_parallel.trainer.batches`)."""

    def __init__(self, loader: Any, mcfg: Any) -> None:
        self.loader, self.mcfg = loader, mcfg

    def _cond(self, batch: Any) -> dict[str, torch.Tensor]:
        if not self.mcfg.text_dim:
            return {}  # unconditional
        return {"text": batch.text.float(), "text_mask": batch.text_mask.bool()}

    def __iter__(self):
        for batch in self.loader:
            # "keys": the samples' keys, which the trainer names when a step's loss is not finite
            if hasattr(batch, "latents"):  # VideoBatch: one bucket, stacked
                yield {"x0": batch.latents.float(), "cond": self._cond(batch), "keys": list(batch.keys)}
            else:  # PackedBatch: padded packs of patch tokens -> the samples' latents
                x0s = unpack(batch.patches.float(), batch.seq_ids, batch.grids, self.mcfg.in_channels, self.mcfg.patch)
                yield {"x0s": x0s, "cond": self._cond(batch), "num_tokens": int(batch.num_tokens), "keys": list(batch.keys)}

    def state_dict(self) -> dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loader.load_state_dict(state)

    def metrics(self) -> dict[str, float]:
        """What was skipped in this data-parallel rank's batches, for the trainer's metrics:
        ``data_skipped`` (distinct samples), ``data_skip_events`` (counting re-reads), ``data_<reason>``
        (see ``ResumableLoader.metrics``). Under subset loading its pp x cp x tp ranks each read some of
        the steps: the loader joins their samples (a sample two ranks met is one), a collective over
        that group (the trainer calls it on every rank at the same steps)."""
        return self.loader.metrics()


def blender_of(d: Any) -> tuple[str, dict[str, Any]]:
    """The blender of the config's ``data`` section and its options: ``data.blender`` (default:
    weighted with packing, else bucketed), ``data.blender_options`` (bucketed: ``data.micro_batch``
    samples per batch unless it or a token budget is given; the durations are the shards', added
    by :func:`shard_loader`)."""
    name = d.blender or ("weighted" if d.packing else "bucketed")
    options = dict(d.blender_options)
    if name == "bucketed" and "tokens_per_batch" not in options:  # the blender takes one of the two
        options = {"batch_size": d.micro_batch, **options}
    return name, options


def shard_loader(cfg: TrainConfig, ctx: RunContext, r: Resolved) -> ShardBatches:
    """vfm-data's loader over the blend (or the shard folders, weighted equally) for this DP rank:
    packed when ``data.packing``, else bucketed by duration; ``data.blender`` (with
    ``data.blender_options``) picks another registered blender."""
    from vfm_data import make_loader

    d = cfg.data
    folders = r.shards.datasets
    path: Any = d.blend if d.blend else folders[0]
    if not d.blend and len(folders) > 1:  # an in-memory blend, weighted equally
        path = {"__module__": "megatron.energon", "__class__": "MetadatasetV2",
                "splits": {"train": {"blend": [{"weight": 1.0, "path": str(f.resolve())} for f in folders]}}}
    pt, ph, _ = r.mcfg.patch
    common = dict(patch_size=ph, temporal_patch=pt, batch_size=d.micro_batch, num_workers=d.workers,
                  latent_channels=r.mcfg.in_channels, seed=cfg.train.seed, dp_rank=ctx.coords.dp_rank,
                  dp_world=ctx.coords.dp_size, trust_dataset_code=d.trust_dataset_code,
                  # the DP rank's pp x cp x tp peers read its steps in turn: 1/n of the bytes each, and
                  # the sample sequence of one process whatever n (tp, cp, pp may change at a resume)
                  group=ctx.data_group, share="turns")  # the trainer's (data.subset_loading), made before the parts
    blender, options = blender_of(d)
    if blender == "bucketed":  # one bucket per batch of the buckets' durations, unless given
        options.setdefault("durations", list(d.durations) or sorted({shape[1] for shape in r.shards.shapes}))
    packing = {"max_seq_len": d.max_seq_len} if d.packing else {}
    loader = make_loader(path, blender=blender, blender_options=options, **packing, **common)
    return ShardBatches(loader, r.mcfg)
