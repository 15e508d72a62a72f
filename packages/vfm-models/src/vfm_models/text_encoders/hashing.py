"""``hash``: a deterministic, weightless text encoder for tests and tiny CPU runs (no meaning, no set-up).

Each word gets a fixed pseudo-random vector seeded by its BLAKE2 hash (the same in every process
and on every machine), plus a sinusoidal position code so that word order matters.
"""

from __future__ import annotations

import hashlib
import math
import re

import torch

from vfm_models.options import named_options
from vfm_models.text_encoders.truncation import warn_once_if_cut

_WORDS = re.compile(r"\w+|[^\w\s]")
#: The largest position table (dim * max_length values) the hash encoder builds: 64 MB in float32.
MAX_TABLE = 1 << 24
END = "</s>"  # appended like T5's end token, so that every text has at least one real token


@named_options("text encoder")
class HashTextEncoder:
    """Words -> hashed embeddings (B, L, dim) and mask (B, L); L is the longest text (<= max_length)."""

    def __init__(self, dim: int = 64, max_length: int = 32, pad_to_max_length: bool = False) -> None:
        if dim < 2 or dim % 2 or max_length < 1 or dim * max_length > MAX_TABLE:  # an export names them: a table that size
            raise ValueError(f"hash encoder needs an even dim >= 2, max_length >= 1 and dim * max_length <= {MAX_TABLE}; "
                             f"got dim={dim}, max_length={max_length}")
        self.dim, self.max_length, self.pad_to_max_length = dim, max_length, pad_to_max_length
        self._cache: dict[str, torch.Tensor] = {}
        pos = torch.arange(max_length, dtype=torch.float64)[:, None]
        freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        self._positions = torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], 1).float() * 0.1  # (max_length, dim)

    @staticmethod
    def declared_width(options) -> int:
        """The embedding width of these options (defaults filled in), unbuilt: an export is checked when written."""
        return int(options["dim"])

    def tokenize(self, text: str) -> list[str]:
        """Lower-cased words and punctuation, cut to ``max_length`` including the end token."""
        return _WORDS.findall(text.lower())[: self.max_length - 1] + [END]

    def count_tokens(self, text: str) -> int:
        """The tokens of ``text`` before the cut at ``max_length`` (its words and punctuation, and the end token)."""
        return len(_WORDS.findall(text.lower())) + 1

    def _vector(self, word: str) -> torch.Tensor:
        if word not in self._cache:
            seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little") & (2**63 - 1)
            self._cache[word] = torch.randn(self.dim, generator=torch.Generator().manual_seed(seed))
        return self._cache[word]

    def encode(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, dim) float32 embeddings (zeros at padding) and (B, L) bool mask (True = real token)."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of strings; wrap a single text as [text]")
        tokens = [self.tokenize(t) for t in texts]
        if not getattr(self, "_truncation_warned", False) and any(len(t) == self.max_length for t in tokens):
            # a text at max_length may have been cut: count those alone (warned once per encoder)
            warn_once_if_cut(self, [self.count_tokens(text) if len(t) == self.max_length else len(t)
                                    for text, t in zip(texts, tokens)], self.max_length)
        length = self.max_length if self.pad_to_max_length else max((len(t) for t in tokens), default=1)
        emb = torch.zeros(len(texts), length, self.dim)
        mask = torch.zeros(len(texts), length, dtype=torch.bool)
        for i, words in enumerate(tokens):
            n = len(words)
            emb[i, :n] = torch.stack([self._vector(w) for w in words]) + self._positions[:n]
            mask[i, :n] = True
        return emb, mask

    __call__ = encode
