"""vfm-models: video diffusion transformer families, diffusion formulations, tokenizers, text encoders.

Importing this package is cheap (no torch); the heavy modules load when a name is used.
"""

from vfm_models.plugins import hookimpl, host

__all__ = ["hookimpl", "host", "get_family", "get_tokenizer", "get_text_encoder", "get_formulation", "get_adapter",
           "build_tokenizer", "build_text_encoder", "build_formulation"]
__version__ = "0.1.0"


def get_family(name: str):
    """The :class:`~vfm_models.families.ModelFamily` registered as ``name``:
    ``get_family("dit-cross").create("tiny", depth=4)`` builds a model from a preset and overrides.

    An unknown name is a :class:`vfm_plugins.UnknownNameError` listing the available ones; a
    plugin's family that cannot be loaded is a :class:`vfm_plugins.PluginLoadError`."""
    return host.get("families", name)


def get_tokenizer(name: str):
    """The tokenizer class (or a plugin's factory) registered as ``name``; call it with the tokenizer's options:
    ``get_tokenizer("pixel")(patch=2)`` (:func:`build_tokenizer` names an option it does not take). Tokenizers take pixels (B, C, T, H, W) in [-1, 1]
    (``encode``, ``decode``, ``latent_shape``)."""
    return host.get("tokenizers", name)


def get_text_encoder(name: str):
    """The text-encoder class (or a plugin's factory) registered as ``name``; call it with its options
    (:func:`build_text_encoder` names an unknown one): ``get_text_encoder("hash")(dim=64).encode(["a cat"])`` -> (embeddings (B, L, D), mask (B, L))."""
    return host.get("text_encoders", name)


def get_formulation(name: str):
    """The diffusion-formulation class (or a plugin's factory) registered as ``name`` (``edm``, ``rectified-flow``,
    ``ddpm``); call it with its options: ``get_formulation("rectified-flow")(shift=3.0)`` (:func:`build_formulation` names an
    option it does not take)."""
    return host.get("formulations", name)


def build_tokenizer(name: str, /, **options):
    """The tokenizer registered as ``name`` built with ``options``: ``build_tokenizer("pixel", patch=2)``. An
    option it does not take is a :class:`vfm_plugins.PluginOptionError` (a TypeError) naming the option, the
    tokenizer and the options it accepts (a plugin's taking ``**kwargs`` accepts any)."""
    return host.build("tokenizers", name, options)


def build_text_encoder(name: str, /, **options):
    """The text encoder registered as ``name`` built with ``options``: ``build_text_encoder("hash", dim=64)``;
    an unknown option is named as :func:`build_tokenizer` names it."""
    return host.build("text_encoders", name, options)


def build_formulation(name: str, /, **options):
    """The formulation registered as ``name`` built with ``options``: ``build_formulation("edm", sigma_data=0.5)``;
    an unknown option is named as :func:`build_tokenizer` names it."""
    return host.build("formulations", name, options)


def get_adapter(name: str):
    """The state-dict adapter registered as ``name`` (``vfm_models.adapters``; an unknown name lists the available ones)."""
    from vfm_models.adapters.base import get_adapter as _get

    return _get(name)
