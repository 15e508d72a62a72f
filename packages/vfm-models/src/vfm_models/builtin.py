"""The built-in vfm-models plugin: registers through the same hooks as any third-party plugin.

Targets are lazy ``"module:attr"`` strings so that listing plugins never imports torch.
"""

from __future__ import annotations

from vfm_models.hookspecs import Register
from vfm_models.plugins import hookimpl


@hookimpl
def vfm_models_register_families(register: Register) -> None:
    """Built-in model families: dit, dit-cross, moviegen, stdit."""
    register("dit", "vfm_models.families.dit.model:FAMILY", description="class-conditional adaLN-Zero DiT")
    register("dit-cross", "vfm_models.families.dit_cross.model:FAMILY",
             description="adaLN-Zero DiT + text cross-attention + QK-norm, optional AdaLN-LoRA (seeds' main model)")
    register("moviegen", "vfm_models.families.moviegen.model:FAMILY",
             description="Llama-style: RMSNorm, SwiGLU, GQA, RoPE, cross-attention, adaLN")
    register("stdit", "vfm_models.families.stdit.model:FAMILY",
             description="spatial + temporal + cross-attention per block, optional full attention blocks")


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
