"""Tokenizers and text encoders are built under one seed, the same in every process that builds them:
one without weights (random init) is then the same network when ``vfm shard`` encodes with it, when
training embeds the empty caption and when ``vfm generate`` decodes or embeds."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

#: the seed ``vfm shard`` builds its tokenizer and text encoder under (its stages' default ``seed``)
SEED = 0


def build_seeded(factory: Callable[..., Any], options: Mapping[str, Any] | None = None, seed: int = SEED) -> Any:
    """``factory(**options)`` under torch seed ``seed``; the caller's random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory(**(options or {}))
