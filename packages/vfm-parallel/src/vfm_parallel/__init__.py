"""vfm-parallel: 4D parallelism (TP, SP, PP, CP, FSDP) on PyTorch-native distributed, RNG streams, checkpoints, the trainer."""

from vfm_parallel.plugins import hookimpl, host

__all__ = ["hookimpl", "host"]
__version__ = "0.1.0"
