"""``vfm plan``: predict the best parallel layout for a model, a context length and a cluster.

    from vfm_parallel.planner import ModelSpec, load_profile, plan
    spec = ModelSpec(name="dit-7B", params=6_876_691_520, layers=32, hidden=3072, heads=24, seq_len=8192)
    result = plan(spec, 256, load_profile("h100"), global_batch=1024)
    print(format_table(result, top=5)); print(parallel_block(result.best))

Nothing here imports torch except :mod:`.calibrate`; the model arrives as plain numbers.
"""

from __future__ import annotations

from vfm_parallel.planner.hardware import Calibration, HardwareProfile, ProfileError, available, load_profile
from vfm_parallel.planner.layouts import Layout, enumerate_layouts, vfm_rejects
from vfm_parallel.planner.memory import Memory, memory
from vfm_parallel.planner.model_spec import ModelSpec, SpecError, block_activation_bytes
from vfm_parallel.planner.ranking import Plan, PlanError, Prediction, plan, predict
from vfm_parallel.planner.report import format_table, parallel_block, to_json
from vfm_parallel.planner.timing import StepTime, step_time

__all__ = ["Calibration", "HardwareProfile", "Layout", "Memory", "ModelSpec", "Plan", "PlanError", "Prediction",
           "ProfileError", "SpecError", "StepTime", "available", "block_activation_bytes", "enumerate_layouts", "format_table", "load_profile",
           "memory", "parallel_block", "plan", "predict", "step_time", "to_json", "vfm_rejects"]
