"""Running a list of stages over a stream of tasks: on Ray with an auto-balancer, or in-process.

Both runners take the same :class:`StageSpec` list and yield the tasks the last stage returns, so
any pipeline (clipping, sharding) reuses them unchanged.
"""

from vfm_curator.execution.spec import StageSpec

__all__ = ["StageSpec"]
