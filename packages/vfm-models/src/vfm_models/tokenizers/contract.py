"""What a tokenizer's ``encode`` and ``decode`` must hand back, checked where vfm calls a registered one
(a plugin's tokenizer returning a numpy array failed as ``'numpy.ndarray' object has no attribute 'dim'``
in every clip of ``vfm shard``, and as a traceback from ``vfm generate``)."""

from __future__ import annotations

from typing import Any


def checked_tensor(value: Any, tokenizer: Any, method: str) -> Any:
    """``value`` if it is a ``torch.Tensor``, else a :class:`~vfm_plugins.PluginResultError` naming the
    tokenizer's class, the method and what it returned."""
    import torch

    if isinstance(value, torch.Tensor):
        return value
    import vfm_models
    from vfm_plugins import PluginResultError

    got = "None" if value is None else f"a {type(value).__module__}.{type(value).__qualname__}"
    shapes = "latents (B, C', T', H', W')" if method == "encode" else "pixels (B, C, T, H, W) in [-1, 1]"
    raise PluginResultError(f"{vfm_models.host.registered_as('tokenizers', tokenizer)}: {method} returned {got}; a tokenizer's "
                            f"{method} returns a torch.Tensor of {shapes}")

