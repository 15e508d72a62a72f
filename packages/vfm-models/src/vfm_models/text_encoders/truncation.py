"""The one warning a text encoder gives when it cuts texts at its ``max_length``: once per encoder (a run
builds one), naming how many tokens the longest cut text kept and dropped, not one line per prompt."""

from __future__ import annotations

import warnings
from typing import Sequence

from vfm_plugins import Notice
from vfm_plugins.text import counted


class TextTruncatedWarning(Notice):
    """Texts longer than a text encoder's ``max_length``: the tokens past it are dropped (the model never
    sees those words). Given once per encoder; ``vfm generate`` names the prompts instead."""


def warn_once_if_cut(encoder: object, lengths: Sequence[int], limit: int) -> None:
    """Warn (once per ``encoder``) when any of ``lengths`` (untruncated token counts) exceeds ``limit``."""
    cut = [n for n in lengths if n > limit]
    if not cut or getattr(encoder, "_truncation_warned", False):
        return
    encoder._truncation_warned = True
    longest = max(cut)
    warnings.warn(f"{type(encoder).__name__}: {counted(len(cut), 'text')} of {len(lengths)} "
                  f"{'was' if len(cut) == 1 else 'were'} longer than its max_length of {limit} tokens and cut there: "
                  f"the longest, {longest} tokens, kept {limit} and dropped {longest - limit}; later texts are cut "
                  "the same way without another warning (a larger max_length in the text encoder's options keeps more)",
                  TextTruncatedWarning, stacklevel=3)
