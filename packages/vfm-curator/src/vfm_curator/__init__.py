"""vfm-curator: clipping and sharding pipelines on Ray with an auto-balancer."""

from vfm_curator.plugins import hookimpl, host

__all__ = ["hookimpl", "host"]
__version__ = "0.1.0"
