"""Samplers: ODE/SDE solvers that turn noise into data with a denoiser callable.

Every sampler has the interface of :class:`vfm_infer.samplers.base.Sampler` and declares the
formulation it samples (``"edm"``: the callable returns D(x; sigma); ``"rectified-flow"``: it
returns the velocity v(x, s); ``"ddpm"``: the noise eps(x, tau)). Built-ins are registered through ``vfm_infer_register_samplers``.
"""

from vfm_infer.samplers.base import Denoiser, Sampler

__all__ = ["Denoiser", "Sampler"]
