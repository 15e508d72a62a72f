"""The one small interface every sampler implements, so one shared test can run them all."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Mapping, Protocol

import torch

from vfm_plugins import unknown_options

#: What each formulation's denoiser callable returns.
FORMULATIONS = {
    "edm": "the denoised estimate D(x; sigma) (x = x0 + sigma * n)",
    "rectified-flow": "the velocity v(x, s) = E[eps - x0 | x_s] (x_s = (1 - s) x0 + s eps)",
    "ddpm": "the noise eps(x, tau) = E[eps | x_tau] (x_tau = sqrt(abar) x0 + sqrt(1 - abar) eps, tau the DDPM step count)",
}


class Denoiser(Protocol):
    """``denoiser(x, level) -> prediction``; ``x`` (B, ...) and ``level`` (B,), the noise level
    (sigma for EDM, s in [0, 1] for rectified flow, the step count tau in [0, T] for DDPM) on ``x``'s
    device, in ``x``'s dtype when that is float32 or float64 and in float32 for half-precision ``x``
    (see :func:`level_dtype`)."""

    def __call__(self, x: torch.Tensor, level: torch.Tensor) -> torch.Tensor: ...


#: ``callback(step, steps)`` after each sampler step (step counts from 1), e.g. for a progress bar.
StepCallback = Callable[[int, int], None]


def level_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a sampler hands the denoiser its noise levels in, for latents of ``dtype``: float32 at
    least, since bfloat16 holds 8 significant bits (DDIM's training timestep 751 would reach the model
    as 752, EDM's sigma 34.99 as 35.0, while the solver steps with the exact level)."""
    return torch.promote_types(dtype, torch.float32)


class Sampler(ABC):
    """Integrates from pure noise (the first noise level) to data (level 0) in ``steps`` steps.

    Subclasses set ``formulation`` (a key of :data:`FORMULATIONS`) and ``order`` (of the ODE
    solver's global error in 1/steps), and implement :meth:`levels` and :meth:`_run`.
    """

    formulation: ClassVar[str]
    order: ClassVar[int]

    def __init__(self, steps: int = 32) -> None:
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"{type(self).__name__}: steps must be an integer >= 1, got {steps!r}")
        self.steps = steps

    @abstractmethod
    def levels(self) -> torch.Tensor:
        """The noise levels visited, (steps + 1,) float64, decreasing, ending at 0."""

    @abstractmethod
    def num_evaluations(self) -> int:
        """How many times :meth:`sample` calls the denoiser."""

    def initial(self, noise: torch.Tensor) -> torch.Tensor:
        """x at the first noise level from standard Gaussian ``noise``."""
        return noise * float(self.levels()[0])

    def sample(
        self,
        denoiser: Denoiser,
        noise: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        callback: StepCallback | None = None,
    ) -> torch.Tensor:
        """Data sample(s) from standard Gaussian ``noise`` (B, ...), in ``noise``'s dtype; ``generator``
        feeds any stochastic part (EDM churn).

        Like any torch code it records autograd through every step when the denoiser's parameters
        require grad: call it under ``torch.inference_mode()`` (as :class:`vfm_infer.VideoPipeline`
        does) unless you mean to differentiate through the sampling."""
        levels = self.levels().tolist()

        def evaluate(x: torch.Tensor, level: float) -> torch.Tensor:
            at = torch.full((x.shape[0],), level, dtype=level_dtype(x.dtype), device=x.device)
            # the state stays in the latents' dtype even where the denoiser answers in a wider one
            return denoiser(x, at).to(x.dtype)

        out = self._run(evaluate, self.initial(noise), levels, generator, callback or (lambda i, n: None))
        return _checked_result(self, out, noise)

    @abstractmethod
    def _run(
        self,
        evaluate: Callable[[torch.Tensor, float], torch.Tensor],
        x: torch.Tensor,
        levels: list[float],
        generator: torch.Generator | None,
        callback: StepCallback,
    ) -> torch.Tensor:
        """The solver loop over ``levels`` (python floats, so the schedule stays exact)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(steps={self.steps})"


def _checked_result(sampler: Sampler, out: Any, noise: torch.Tensor) -> torch.Tensor:
    """``out`` if ``_run`` returned latents shaped like ``noise``, else a
    :class:`~vfm_plugins.PluginResultError` naming the sampler (a plugin's ``_run`` returning None or a
    numpy array failed later as ``isfinite(): argument 'input' must be Tensor``, a wrong shape in the
    tokenizer's decode, neither naming the sampler)."""
    if isinstance(out, torch.Tensor) and out.shape == noise.shape:
        return out
    import vfm_infer
    from vfm_plugins import PluginResultError

    got = ("None" if out is None else f"a tensor of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor)
           else f"a {type(out).__module__}.{type(out).__qualname__}")
    raise PluginResultError(f"{vfm_infer.host.registered_as('samplers', sampler)}: _run returned {got}; a sampler's _run returns the final "
                            f"latents x, a torch.Tensor of the noise's shape {tuple(noise.shape)}")


def build_sampler(name: str, cls: type, steps: int, defaults: Mapping[str, Any], options: Mapping[str, Any]):
    """``cls(steps, **defaults, **options)``, with a ValueError naming the sampler's options for an option it
    does not take, and the option, the value and the type taken for a value of the wrong type (checked
    against the constructor's annotations, instead of its TypeError or a bool read as a number). ``defaults``
    (the formulation's schedule options) are passed only where ``cls`` takes them (by name, or any name
    through ``**kwargs``): :func:`vfm_plugins.unknown_options` decides, as for every plugin's options."""
    unknown, accepted = unknown_options(cls, [*options, *defaults])
    steps_name = _steps_parameter(cls)  # `steps` in Sampler; a plugin's constructor may call it otherwise
    names = [k for k in accepted if k != steps_name]
    defaults = {k: v for k, v in defaults.items() if k not in unknown}
    unknown = sorted(set(unknown) & set(options))
    if steps_name in options or unknown:
        bad = ", ".join([f"{steps_name} (set by the steps of the request)"] * (steps_name in options) + unknown)
        raise ValueError(f"sampler {name!r} has no option {bad}; its options: {', '.join(names) or 'none'}")
    from vfm_infer.samplers.option_types import option_type_problems

    wrong_type = option_type_problems(cls, options, defaults)  # the caller's options; the export's schedule is its own
    if wrong_type:
        raise ValueError(f"sampler {name!r}: " + "; ".join(wrong_type))
    try:
        return cls(steps, **{**defaults, **options})
    except TypeError as exc:  # a value of the wrong type for an option without a readable annotation
        given = ", ".join(f"{k}={v!r}" for k, v in options.items())
        raise ValueError(f"sampler {name!r} cannot take the options {given}: {exc}") from None
    except ValueError as exc:  # its own range checks ("churn must be ... >= 0"): say whose option it is
        raise ValueError(_naming(name, str(exc))) from None


def _steps_parameter(cls: type) -> str:
    """The constructor parameter the step count goes to (``cls(steps, ...)``: the first positional one), so
    an option of that name is refused as the step count (``n_steps=2`` was "got multiple values")."""
    import inspect

    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return "steps"
    first = next((p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), None)
    return first.name if first is not None else "steps"


def _naming(name: str, message: str) -> str:
    """``message`` led by ``sampler 'name': `` unless it names the sampler already (a plugin's own check
    written as the built-in errors read, "sampler 'my-sampler': gain must be >= 0"): not twice."""
    if re.search(rf"(?<![A-Za-z0-9_+-]){re.escape(name)}(?![A-Za-z0-9_+-])", message):
        return message
    return f"sampler {name!r}: {message}"
