"""Hook specifications of the vfm_models plugin host.

Every hook receives one argument, ``register``: call ``register(name, target, description=...)``
once per thing you provide. ``target`` is the object itself or a lazy ``"module:attr"`` string that
is imported only when the name is used. A name registered twice is an error naming both providers.
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

hookspec = pluggy.HookspecMarker("vfm_models")


class Register(Protocol):
    """The callback every hook receives."""

    def __call__(self, name: str, target: Any, *, description: str = "") -> None: ...


@hookspec
def vfm_models_register_families(register: Register) -> None:
    """Register model families (DiT, DiT+cross-attention, MovieGen, ST-DiT, ...). Target: a `vfm_models.families.ModelFamily`."""


@hookspec
def vfm_models_register_tokenizers(register: Register) -> None:
    """Register video tokenizers (causal 3D autoencoder, Cosmos loader, pixel). Target: a factory `(**options) -> Tokenizer`."""


@hookspec
def vfm_models_register_text_encoders(register: Register) -> None:
    """Register text encoders (T5/UMT5 from a local path, offline encoders). Target: a factory `(**options) -> TextEncoder`."""


@hookspec
def vfm_models_register_formulations(register: Register) -> None:
    """Register diffusion formulations (EDM, rectified flow). Target: a factory `(**options) -> Formulation`."""
