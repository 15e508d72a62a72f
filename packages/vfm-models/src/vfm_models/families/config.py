"""The hyper-parameters shared by the transformer families (each family subclasses with its defaults)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Optional, Tuple

POS_EMBEDS = ("sincos", "rope", "sincos2d")


def check_positive(config: object, names: tuple[str, ...], who: str = "") -> None:
    """Each field ``names`` of ``config`` is a finite number > 0 (not a bool, a string or NaN); else a
    ValueError ``{who}{name} must be a finite number > 0``."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
            raise ValueError(f"{who}{name} must be a finite number > 0; got {value!r}")


@dataclass
class TransformerConfig:
    in_channels: int = 4
    out_channels: Optional[int] = None  # None, in_channels, or 2 x in_channels (DiT's learned sigma: noise first)
    patch: Tuple[int, int, int] = (1, 2, 2)  # (pt, ph, pw)
    hidden: int = 384
    depth: int = 12
    num_heads: int = 6
    num_kv_heads: Optional[int] = None  # None: num_heads (no GQA)
    mlp_ratio: float = 4.0
    mlp: str = "gelu"  # gelu | swiglu
    norm: str = "layer"  # layer | rms
    qk_norm: bool = False
    pos_embed: str = "sincos"  # sincos (absolute, added to tokens) | rope (3D, in attention) | sincos2d (DiT's image table)
    rope_theta: float = 10000.0
    adaln_lora_rank: int = 0  # 0: full AdaLN-Zero; r > 0: AdaLN-LoRA with rank r
    text_dim: int = 0  # > 0: cross-attention to text of this width
    num_classes: int = 0  # > 0: class-conditional (cond={"y": ...})
    attention_backend: Optional[str] = None  # None: automatic (see vfm_models.blocks.backends)
    timestep_freq_shift: int = 0  # timestep features' frequency divisor is dim/2 - shift (DiT: 0, diffusers' DiT: 1)
    mlp_norm_eps: float = 1e-6  # eps of the norm before the MLP (DiT: 1e-6; diffusers' DiT: its norm_eps, 1e-5)

    def __post_init__(self) -> None:
        # an option from a TOML file or `--set` reaches here as it was typed: a 0, a negative or a string
        # built a model with no blocks or no channels, or failed inside torch naming no option
        for name, low in (("in_channels", 1), ("hidden", 1), ("depth", 1), ("num_heads", 1), ("adaln_lora_rank", 0),
                          ("text_dim", 0), ("num_classes", 0), ("timestep_freq_shift", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
        kv = self.num_kv_heads
        if kv is not None and (isinstance(kv, bool) or not isinstance(kv, numbers.Integral) or kv < 1):
            raise ValueError(f"num_kv_heads must be None (= num_heads) or an integer >= 1; got {self.num_kv_heads!r}")
        check_positive(self, ("mlp_ratio", "rope_theta", "mlp_norm_eps"))
        if not isinstance(self.qk_norm, bool):
            raise ValueError(f"qk_norm must be true or false; got {self.qk_norm!r}")
        self.patch = tuple(int(p) for p in self.patch)
        if len(self.patch) != 3 or min(self.patch) < 1:
            raise ValueError(f"patch must be three positive ints (pt, ph, pw), got {self.patch}")
        if self.hidden % self.num_heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by num_heads ({self.num_heads})")
        if self.num_heads % self.kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.kv_heads})")
        if self.out_channels is not None and self.out_channels not in (self.in_channels, 2 * self.in_channels):
            raise ValueError(
                f"out_channels must equal in_channels ({self.in_channels}), be 2 x in_channels "
                f"({2 * self.in_channels}: DiT's learned sigma, the prediction then the variance channels) "
                f"or be left unset; got {self.out_channels}"
            )
        if self.pos_embed not in POS_EMBEDS:
            raise ValueError(f"pos_embed must be one of {', '.join(POS_EMBEDS)}; got {self.pos_embed!r}")
        # the position tables' own limits, here rather than at the first forward
        if self.pos_embed == "rope" and (self.head_dim % 2 or self.head_dim < 6):
            raise ValueError(f"pos_embed 'rope' needs an even head_dim (hidden / num_heads) >= 6; got {self.head_dim} "
                             f"(hidden {self.hidden}, num_heads {self.num_heads})")
        if self.pos_embed == "sincos" and (self.hidden % 2 or self.hidden < 6):
            raise ValueError(f"pos_embed 'sincos' needs an even hidden >= 6; got {self.hidden}")
        if self.pos_embed == "sincos2d" and self.hidden % 4:
            raise ValueError(f"pos_embed 'sincos2d' needs hidden divisible by 4; got {self.hidden}")
        from vfm_models.blocks.backends import BACKENDS

        if self.attention_backend is not None and self.attention_backend not in BACKENDS:
            # checked here, not at the first forward: a typo would otherwise surface only after the model is built
            # and sharded, in the first training step
            raise ValueError(f"attention_backend must be None (automatic) or one of {', '.join(BACKENDS)}; "
                             f"got {self.attention_backend!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def output_channels(self) -> int:
        return self.out_channels or self.in_channels

    @property
    def learned_sigma(self) -> bool:
        """The output holds DiT's learned variance after the prediction (2 x in_channels channels)."""
        return self.output_channels == 2 * self.in_channels


#: The DiT paper's model sizes (Peebles & Xie, Table 1), shared by the DiT-like families' presets.
DIT_SIZES = {
    "S": dict(hidden=384, depth=12, num_heads=6),
    "B": dict(hidden=768, depth=12, num_heads=12),
    "L": dict(hidden=1024, depth=24, num_heads=16),
    "XL": dict(hidden=1152, depth=28, num_heads=16),
}
