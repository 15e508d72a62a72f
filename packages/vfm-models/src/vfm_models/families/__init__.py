"""Model families: one folder per family (its ``model.py``: config, presets, build, parallel plan), the
shared transformer in ``base.py``, how a family may be split in ``plan.py``, shared blocks in ``vfm_models.blocks``."""

from vfm_models.families.plan import ParallelPlan
from vfm_models.families.spec import ModelFamily

__all__ = ["ModelFamily", "ParallelPlan"]
