"""vfm-data: WebDataset shards prepared for megatron-energon: packing, blending, exact resume, model-parallel subset loading."""

from vfm_data.plugins import hookimpl, host

__all__ = [
    "ChannelMismatchError",
    "DataError",
    "PackedBatch",
    "ResumableLoader",
    "SampleMeta",
    "ShardError",
    "ShardWriter",
    "VideoBatch",
    "VideoSample",
    "VideoTaskEncoder",
    "hookimpl",
    "host",
    "make_loader",
    "prepare_dataset",
    "write_blend",
]
__version__ = "0.1.0"

_LAZY = {
    "ChannelMismatchError": "vfm_data.sample",
    "DataError": "vfm_data.errors",
    "PackedBatch": "vfm_data.batches",
    "ResumableLoader": "vfm_data.loader",
    "SampleMeta": "vfm_data.format",
    "ShardError": "vfm_data.errors",
    "ShardWriter": "vfm_data.writer",
    "VideoBatch": "vfm_data.batches",
    "VideoSample": "vfm_data.sample",
    "VideoTaskEncoder": "vfm_data.task_encoder",
    "make_loader": "vfm_data.loader",
    "prepare_dataset": "vfm_data.writer",
    "write_blend": "vfm_data.blend_file",
}


def __getattr__(name: str):
    # Lazy: `import vfm_data` (e.g. by `vfm plugins`) must not import energon or torch.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vfm_data' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names too, so that help() and tab completion show them
    return sorted({*globals(), *_LAZY})
