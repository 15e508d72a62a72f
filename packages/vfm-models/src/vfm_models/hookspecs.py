"""Hook specifications of the vfm_models plugin host: each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

import pluggy

from vfm_plugins import Register

hookspec = pluggy.HookspecMarker("vfm_models")


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


@hookspec
def vfm_models_register_adapters(register: Register) -> None:
    """Register state-dict adapters, named by the external format they read and write (diffusers-dit,
    facebookresearch-dit, ...). Target: a `vfm_models.adapters.StateDictAdapter`."""
