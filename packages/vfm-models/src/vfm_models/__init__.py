"""vfm-models: video diffusion transformer families, diffusion formulations, tokenizers, text encoders.

Importing this package is cheap (no torch); the heavy modules load when a name is used.
"""

from vfm_models.plugins import hookimpl, host

__all__ = ["hookimpl", "host", "get_family", "get_tokenizer", "get_text_encoder", "get_formulation", "get_adapter"]
__version__ = "0.1.0"


def get_family(name: str):
    """The :class:`~vfm_models.families.ModelFamily` registered as ``name``:
    ``get_family("dit-cross").create("tiny", depth=4)`` builds a model from a preset and overrides.

    An unknown name is a :class:`vfm_plugins.UnknownNameError` listing the available ones; a
    plugin's family that cannot be loaded is a :class:`vfm_plugins.PluginLoadError`."""
    return host.get("families", name)


def get_tokenizer(name: str):
    """The tokenizer class (or a plugin's factory) registered as ``name``; call it with the tokenizer's options:
    ``get_tokenizer("pixel")(patch=2)``. Tokenizers take pixels (B, C, T, H, W) in [-1, 1]
    (``encode``, ``decode``, ``latent_shape``)."""
    return host.get("tokenizers", name)


def get_text_encoder(name: str):
    """The text-encoder class (or a plugin's factory) registered as ``name``; call it with its options:
    ``get_text_encoder("hash")(dim=64).encode(["a cat"])`` -> (embeddings (B, L, D), mask (B, L))."""
    return host.get("text_encoders", name)


def get_formulation(name: str):
    """The diffusion-formulation class (or a plugin's factory) registered as ``name`` (``edm``, ``rectified-flow``,
    ``ddpm``); call it with its options: ``get_formulation("rectified-flow")(shift=3.0)``."""
    return host.get("formulations", name)


def get_adapter(name: str):
    """The state-dict adapter registered as ``name`` (``vfm_models.adapters``; an unknown name lists the available ones)."""
    from vfm_models.adapters.base import get_adapter as _get

    return _get(name)
