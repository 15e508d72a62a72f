"""Model families: one folder per family (``model.py`` + ``plan.py``), shared blocks in ``vfm_models.blocks``."""

from vfm_models.families.plan import ParallelPlan
from vfm_models.families.spec import ModelFamily

__all__ = ["ModelFamily", "ParallelPlan"]
