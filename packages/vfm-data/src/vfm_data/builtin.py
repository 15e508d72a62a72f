"""The built-in vfm-data plugin: registers through the same hooks as any third-party plugin."""

from __future__ import annotations

from vfm_data.hookspecs import Register
from vfm_data.plugins import hookimpl


@hookimpl
def vfm_data_register_blenders(register: Register) -> None:
    """Built-in blenders: weighted (energon's metadataset blend), scheduled, bucketed."""
    register("weighted", "vfm_data.blenders.weighted:WeightedBlender",
             description="energon metadataset blend with fixed weights")
    register("scheduled", "vfm_data.blenders.scheduled:ScheduledBlender",
             description="weights that change over training (milestones in samples)")
    register("bucketed", "vfm_data.blenders.bucketed:BucketedBlender",
             description="batches of one resolution/duration bucket")
