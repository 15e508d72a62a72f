"""The model skeleton shared by all families: embed -> context -> blocks -> head (docs/contracts.md, section 1).

Plain batches are (B, C, T, H, W) tensors. Packed batches are lists of (C, T_i, H_i, W_i) latents
concatenated into one (1, sum S_i, D) sequence with ``cu_seqlens``; attention never crosses samples,
so a packed forward equals running each sample alone.
"""

from __future__ import annotations

import warnings
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn
from vfm_plugins import Notice

from vfm_models.blocks.adaln import AdaLN, AdaLNShared
from vfm_models.blocks.context import BlockContext
from vfm_models.blocks.embedders import LabelEmbedder, TimestepEmbedder
from vfm_models.blocks.final import FinalLayer
from vfm_models.blocks.patch import PatchEmbed3D, unpatchify
from vfm_models.blocks.position import rope_3d, sincos_2d, sincos_3d
from vfm_models.families.config import TransformerConfig
from vfm_models.families.plan import ParallelPlan, ParallelPlanMissingError

Cond = Optional[Dict[str, torch.Tensor]]


class DiffusionTransformer(nn.Module):
    """A diffusion transformer over 3D patch tokens. Subclasses choose ``block_cls`` and ``parallel_plan``."""

    block_cls: type = nn.Module

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.config = cfg
        D, patch = cfg.hidden, cfg.patch
        self.x_embedder = PatchEmbed3D(cfg.in_channels, D, patch)
        self.t_embedder = TimestepEmbedder(D, freq_shift=cfg.timestep_freq_shift)
        if cfg.num_classes:
            self.y_embedder = LabelEmbedder(cfg.num_classes, D)
        if cfg.adaln_lora_rank:
            self.adaln_shared = AdaLNShared(D, self.block_cls.chunks)
        self.blocks = nn.ModuleList(self.block_cls(cfg, i) for i in range(cfg.depth))
        self.final_layer = FinalLayer(D, patch[0] * patch[1] * patch[2] * cfg.output_channels, cfg.norm)
        self.initialize_weights()

    def initialize_weights(self) -> None:
        """The weight initialisation, the one place it is set (the same seed gives the same weights
        in every process: the parallel strategies rely on it).

        From DiT (facebookresearch/DiT ``initialize_weights``): the patch embedding xavier-uniform;
        the timestep MLP and the label table normal(0, 0.02); adaLN-Zero (every modulation, the
        shared AdaLN-LoRA term and the LoRA up-projection start at zero, and so does the final
        linear, so each block starts as the identity and the first output is 0). Every other Linear
        keeps PyTorch's default (kaiming-uniform weights, uniform biases), applied when it is built,
        rather than DiT's xavier weights with zero biases: on the demo's data DiT's choice trained
        worse at every noise level (packages/vfm-models/README.md, "Initialisation").
        """
        nn.init.xavier_uniform_(self.x_embedder.proj.weight)
        for layer in (self.t_embedder.mlp[0], self.t_embedder.mlp[2]):
            nn.init.normal_(layer.weight, std=0.02)
        if hasattr(self, "y_embedder"):
            nn.init.normal_(self.y_embedder.table.weight, std=0.02)
        zero = [self.final_layer.linear, self.final_layer.adaln]
        zero += [m for m in self.modules() if isinstance(m, (AdaLN, AdaLNShared))]
        for module in zero:
            for name, param in module.named_parameters():
                if not name.startswith("down."):  # AdaLN-LoRA keeps a random down-projection (its up is zero)
                    nn.init.zeros_(param)

    # --- the parts a parallel strategy drives -------------------------------------------------

    def embed(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int, int]]:
        """(B, C, T, H, W) -> tokens (B, S, D), grid (T', H', W')."""
        tokens, grid = self.x_embedder(x)
        if self.config.pos_embed in ("sincos", "sincos2d"):
            table = sincos_3d if self.config.pos_embed == "sincos" else sincos_2d
            tokens = tokens + table(grid, self.config.hidden, tokens.device).to(tokens.dtype)
        return tokens, grid

    def context(self, grid: Tuple[int, int, int], t: torch.Tensor, cond: Cond = None) -> BlockContext:
        """The BlockContext of a plain batch; uses only the conditioning embedders and pure functions."""
        _check_levels(t)
        cond = self._check_cond(cond, t.shape[0])
        c = self._condition(t, cond)  # (B, D)
        return BlockContext(
            c=c,
            mod=self.adaln_shared(c) if self.config.adaln_lora_rank else None,
            rope=self._rope([grid], c.device),
            grid=tuple(grid),
            text=cond.get("text"),
            text_mask=cond.get("text_mask"),
        )

    def head(self, tokens: torch.Tensor, ctx: BlockContext) -> torch.Tensor:
        """(B, S, D) -> (B, C_out, T, H, W)."""
        out = self.final_layer(tokens, ctx.c)
        return unpatchify(out, ctx.grid, self.config.patch, self.config.output_channels)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: Cond = None) -> torch.Tensor:
        _check_levels(t)
        if x.dim() == 5 and t.shape[0] not in (1, x.shape[0]):
            # one level per sample, or one for all (broadcast); anything else failed deep in the blocks
            raise ValueError(f"t has {t.shape[0]} noise levels but x has {x.shape[0]} samples; t must be (B,) = "
                             f"({x.shape[0]},), or (1,) for one level for all")
        tokens, grid = self.embed(x)
        ctx = self.context(grid, t, cond)
        for block in self.blocks:
            tokens = block(tokens, ctx)
        return self.head(tokens, ctx)

    # --- packed batches (THD) -----------------------------------------------------------------

    def embed_packed(self, latents: Sequence[torch.Tensor]) -> Tuple[torch.Tensor, Tuple[Tuple[int, int, int], ...], torch.Tensor]:
        """N latents (C, T_i, H_i, W_i) -> tokens (1, sum S_i, D), per-sample grids, cu_seqlens (N+1,) int32."""
        if len(latents) == 0:
            raise ValueError("embed_packed needs at least one latent")
        pieces, grids = [], []
        for x in latents:
            if x.dim() != 4:
                raise ValueError(f"each packed latent must be (C, T, H, W), got shape {tuple(x.shape)}")
            tokens, grid = self.embed(x[None])
            pieces.append(tokens)
            grids.append(tuple(grid))
        lengths = torch.tensor([0] + [p.shape[1] for p in pieces])
        return torch.cat(pieces, dim=1), tuple(grids), lengths.cumsum(0).to(torch.int32)

    def context_packed(self, grids: Sequence[Tuple[int, int, int]], cu_seqlens: torch.Tensor, t: torch.Tensor,
                       cond: Cond = None) -> BlockContext:
        """Per-sample t (N,) and cond (N, ...) -> a context with per-sample conditioning (N, D) and the
        sample of each token (``token_sample``), so modulation is computed once per sample."""
        _check_levels(t)
        cond = self._check_cond(cond, t.shape[0])
        if t.shape[0] != len(grids):
            raise ValueError(f"packed batch has {len(grids)} samples but t has {t.shape[0]} entries")
        lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).long().cpu()  # on the host already (embed_packed)
        c = self._condition(t, cond)  # (N, D)
        mod = self.adaln_shared(c) if self.config.adaln_lora_rank else None
        token_sample = torch.repeat_interleave(torch.arange(len(grids)), lengths)[None].to(c.device)
        text = cond.get("text")
        text_cu = text_max = None
        if text is not None:  # keep only the real tokens of each caption, concatenated
            mask = cond.get("text_mask")
            mask = torch.ones(text.shape[:2], dtype=torch.bool, device=text.device) if mask is None else mask.bool()
            text_len = mask.sum(1)
            text = text[mask][None]  # (1, sum L_i, D_text)
            text_cu = torch.cat([text_len.new_zeros(1), text_len.cumsum(0)]).to(torch.int32)
            text_max = int(text_len.max())
        return BlockContext(
            c=c, mod=mod, token_sample=token_sample, rope=self._rope(grids, c.device), grid=tuple(grids),
            text=text, text_mask=None, cu_seqlens=cu_seqlens.to(c.device),
            max_seqlen=int(lengths.max()), text_cu_seqlens=text_cu, text_max_seqlen=text_max,
        )

    def head_packed(self, tokens: torch.Tensor, ctx: BlockContext) -> List[torch.Tensor]:
        """(1, S, D) -> N outputs (C_out, T_i, H_i, W_i)."""
        out = self.final_layer(tokens, ctx.c, ctx.token_sample)
        bounds = ctx.cu_seqlens.tolist()
        cfg = self.config
        return [
            unpatchify(out[:, a:b], grid, cfg.patch, cfg.output_channels)[0]
            for a, b, grid in zip(bounds[:-1], bounds[1:], ctx.grid)
        ]

    def forward_packed(self, latents: Sequence[torch.Tensor], t: torch.Tensor, cond: Cond = None) -> List[torch.Tensor]:
        """Denoise N samples of different grids in one packed sequence; equals ``forward`` on each alone."""
        tokens, grids, cu_seqlens = self.embed_packed(latents)
        ctx = self.context_packed(grids, cu_seqlens, t, cond)
        for block in self.blocks:
            tokens = block(tokens, ctx)
        return self.head_packed(tokens, ctx)

    # --- helpers -------------------------------------------------------------------------------

    def parallel_plan(self) -> ParallelPlan:
        """How vfm-parallel may split this model; each family's subclass defines it (``vfm train``
        reads it even in one process). This one names the family and what to define."""
        raise ParallelPlanMissingError.of(self)

    def conditioning_modules(self) -> Tuple[str, ...]:
        """Top-level conditioning embedders present in this model (listed in the plan)."""
        return tuple(n for n in ("t_embedder", "y_embedder", "adaln_shared") if hasattr(self, n))

    def _condition(self, t: torch.Tensor, cond: Dict[str, torch.Tensor]) -> torch.Tensor:
        c = self.t_embedder(t)
        if self.config.num_classes:
            c = c + self.y_embedder(cond["y"].to(c.device))
        return c

    def _rope(self, grids, device):
        if self.config.pos_embed != "rope":
            return None
        tables = [rope_3d(g, self.config.head_dim, self.config.rope_theta, device) for g in grids]
        return tuple(torch.cat(parts, dim=0)[None] for parts in zip(*tables))  # (1, S, Dh/2) each

    def _cond_form(self) -> str:
        """What this model's ``cond`` holds, for errors."""
        if self.config.num_classes:
            return "{'y': (B,) class labels}"
        if self.config.text_dim:
            return f"{{'text': (B, L, {self.config.text_dim}), 'text_mask': (B, L) bool (optional)}}"
        return "None (unconditional)"

    def _check_cond(self, cond: Cond, batch: int) -> Dict[str, torch.Tensor]:
        # a tensor passed as cond was "Boolean value of Tensor ... is ambiguous" from `cond or {}`
        if cond is not None and not isinstance(cond, Mapping):
            raise TypeError(f"cond must be a dict, {self._cond_form()}; got a {type(cond).__name__}")
        cond = dict(cond or {})
        for key, value in cond.items():
            if value is not None and not isinstance(value, torch.Tensor):
                raise TypeError(f"cond[{key!r}] must be a tensor; got a {type(value).__name__} "
                                f"(this model takes cond = {self._cond_form()})")
        cfg = self.config
        self._check_cond_keys(cond)
        if cfg.num_classes and "y" not in cond:
            raise ValueError(f"this class-conditional model needs cond={self._cond_form()}; got keys {sorted(cond)}")
        y = cond.get("y")
        if cfg.num_classes and y is not None and y.numel() and not y.is_floating_point():
            self._check_labels(y)
        if cfg.text_dim:
            text = cond.get("text")
            if text is None or text.dim() != 3 or text.shape[-1] != cfg.text_dim:
                shape = None if text is None else tuple(text.shape)
                raise ValueError(f"this model needs cond['text'] of shape (B, L, {cfg.text_dim}); got {shape}")
            mask = cond.get("text_mask")
            if mask is not None and tuple(mask.shape) != tuple(text.shape[:2]):
                raise ValueError(f"text_mask must be (B, L) = {tuple(text.shape[:2])}, got {tuple(mask.shape)}")
        for key, value in cond.items():
            if value is not None and value.shape[0] != batch:
                raise ValueError(f"cond[{key!r}] has {value.shape[0]} samples but t has {batch}")
        text, dtype = cond.get("text"), self.t_embedder.mlp[0].weight.dtype
        if text is not None and text.is_floating_point() and text.dtype != dtype:
            # the text encoders give float32: a bf16 model's cross-attention failed on it ("mat1 and mat2
            # must have the same dtype"); the noise level is cast the same way (TimestepEmbedder)
            cond["text"] = text.to(dtype)
        return cond


    def cond_keys(self) -> frozenset[str]:
        """The ``cond`` keys this model reads: ``y`` (class-conditional), ``text`` and ``text_mask``
        (text-conditional), none (unconditional). A plugin family reading more extends it."""
        if self.config.num_classes:
            return frozenset({"y"})
        if self.config.text_dim:
            return frozenset({"text", "text_mask"})
        return frozenset()

    def _check_cond_keys(self, cond: Dict[str, torch.Tensor]) -> None:
        """A key no conditioning reads (a typo: ``txt``, ``labels``) is an error naming the accepted keys. A
        key another kind of model reads (``y`` given to an unconditional model, as the synthetic loader's
        labels are) is ignored with one warning per model, naming it: a model cannot tell a caller's
        mistake from data that carries more than this model uses."""
        given = {k for k, v in cond.items() if v is not None}
        accepted = self.cond_keys()
        unknown = sorted(given - accepted - CONDITION_KEYS)
        if unknown:
            raise ValueError(f"cond has key{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}, which this model "
                             f"does not read; it takes cond = {self._cond_form()} (accepted keys: "
                             f"{', '.join(map(repr, sorted(accepted))) or 'none'}; a family that reads "
                             "more keys names them in its cond_keys())")
        ignored = sorted(given - accepted)
        if ignored and not getattr(self, "_warned_ignored_cond", False):
            self._warned_ignored_cond = True
            warnings.warn(f"cond key{'s' * (len(ignored) > 1)} {', '.join(map(repr, ignored))} ignored: this model takes "
                          f"cond = {self._cond_form()} (warned once per model)", IgnoredConditionWarning, stacklevel=2)

    def _check_labels(self, y: torch.Tensor) -> None:
        """Class labels in 0..num_classes (the last one is the null class). On the host the check is a
        ValueError; on CUDA it is an asynchronous device assertion, so that it costs no synchronisation per
        step (reading ``y.min()`` would) and still stops the run, with this message, rather than an
        embedding lookup's out-of-bounds read."""
        n = self.config.num_classes
        message = f"this model takes labels 0..{n - 1} and {n} for the null class (num_classes = {n})"
        if y.device.type == "cpu":
            low, high = int(y.min()), int(y.max())
            if low < 0 or high > n:
                raise ValueError(f"class label {low if low < 0 else high} is out of range: {message}")
        elif y.device.type == "cuda":
            torch._assert_async(((y >= 0) & (y <= n)).all(), f"a class label is out of range: {message}")


class IgnoredConditionWarning(Notice):
    """A ``cond`` key this model does not read (another kind of model does): it cannot change the output."""


#: The ``cond`` keys the built-in conditionings read (class labels; text embeddings and their mask).
CONDITION_KEYS = frozenset({"y", "text", "text_mask"})


def _check_levels(t) -> None:
    """Noise levels are a (B,) tensor; a float or a 0-d tensor failed deep inside (IndexError)."""
    if not isinstance(t, torch.Tensor) or t.dim() != 1:
        got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else f"a {type(t).__name__}"
        raise ValueError(f"t must be a 1-D tensor of noise levels, (B,) one per sample or (1,) for one level "
                         f"for all (e.g. torch.full((1,), 0.5)); got {got}")
