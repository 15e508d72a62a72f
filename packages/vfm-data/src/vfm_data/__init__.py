"""vfm-data: WebDataset shards prepared for megatron-energon: packing, blending, exact resume, model-parallel subset loading."""

from vfm_data.plugins import hookimpl, host

__all__ = ["hookimpl", "host"]
__version__ = "0.1.0"
