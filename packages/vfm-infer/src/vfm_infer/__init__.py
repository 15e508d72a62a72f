"""vfm-infer: samplers, guidance, context-parallel denoising and video output."""

from vfm_infer.plugins import hookimpl, host

__all__ = ["hookimpl", "host"]
__version__ = "0.1.0"
