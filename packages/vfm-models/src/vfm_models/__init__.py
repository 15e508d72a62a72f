"""vfm-models: video diffusion transformer families, diffusion formulations, tokenizers, text encoders.

Importing this package is cheap (no torch); the heavy modules load when a name is used.
"""

from vfm_models.plugins import hookimpl, host

__all__ = ["hookimpl", "host", "get_family", "get_tokenizer", "get_text_encoder", "get_formulation", "get_adapter"]
__version__ = "0.1.0"


def get_family(name: str):
    """The model family registered as ``name`` (an unknown name lists the available ones)."""
    return host.get("families", name)


def get_tokenizer(name: str):
    """The tokenizer factory registered as ``name``."""
    return host.get("tokenizers", name)


def get_text_encoder(name: str):
    """The text-encoder factory registered as ``name``."""
    return host.get("text_encoders", name)


def get_formulation(name: str):
    """The diffusion-formulation factory registered as ``name``."""
    return host.get("formulations", name)


def get_adapter(name: str):
    """The state-dict adapter registered as ``name`` (``vfm_models.adapters``; an unknown name lists the available ones)."""
    from vfm_models.adapters.base import get_adapter as _get

    return _get(name)
