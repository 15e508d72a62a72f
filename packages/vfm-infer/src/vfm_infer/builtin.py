"""The built-in vfm-infer plugin: registers through the same hooks as any third-party plugin.

Targets are lazy ``"module:attr"`` strings so that listing plugins never imports torch.
"""

from __future__ import annotations

from vfm_infer.hookspecs import Register
from vfm_infer.plugins import hookimpl


@hookimpl
def vfm_infer_register_samplers(register: Register) -> None:
    """Built-in samplers."""
    register("edm-heun", "vfm_infer.samplers.edm:EDMHeun", description="EDM Heun (2nd order, 2N-1 evaluations, optional churn)")
    register("edm-euler", "vfm_infer.samplers.edm:EDMEuler", description="EDM Euler (1st order, optional churn)")
    register("dpm-solver++", "vfm_infer.samplers.dpm_solver:DPMSolverPP2M", description="DPM-Solver++(2M) on the EDM schedule")
    register("flow-euler", "vfm_infer.samplers.flow:FlowEuler", description="rectified-flow Euler with timestep shift")
    register("flow-heun", "vfm_infer.samplers.flow:FlowHeun", description="rectified-flow Heun with timestep shift")
    register("ddim", "vfm_infer.samplers.ddim:DDIM", description="DDIM for DDPM noise prediction (eta 0: deterministic; diffusers' DDIMScheduler)")
    register("vp-ode", "vfm_infer.samplers.ddim:VPODE", description="DPM-Solver++(2M) on the VP probability-flow ODE of a DDPM model")


@hookimpl
def vfm_infer_register_metrics(register: Register) -> None:
    """Built-in metrics."""
    register("shapes", "vfm_infer.metrics.shapes:ShapesAdherence",
             description="prompt adherence for 'a <colour> <shape> moving <direction>': flat background, colour, motion")
