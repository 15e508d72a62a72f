"""The built-in vfm-models plugin: registers through the same hooks as any third-party plugin.

Targets are lazy ``"module:attr"`` strings so that listing plugins never imports torch.
"""

from __future__ import annotations

from vfm_models.hookspecs import Register
from vfm_models.plugins import hookimpl


@hookimpl
def vfm_models_register_families(register: Register) -> None:
    """Built-in model families."""


@hookimpl
def vfm_models_register_tokenizers(register: Register) -> None:
    """Built-in tokenizers."""
    register("pixel", "vfm_models.tokenizers.pixel:PixelTokenizer", description="identity/patch tokenizer for tiny CPU runs")


@hookimpl
def vfm_models_register_text_encoders(register: Register) -> None:
    """Built-in text encoders."""


@hookimpl
def vfm_models_register_formulations(register: Register) -> None:
    """Built-in diffusion formulations."""
