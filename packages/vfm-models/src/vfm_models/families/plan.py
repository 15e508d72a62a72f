"""How a model family *describes* its parallelization, so that vfm-parallel can *apply* it;
and the builder the transformer families share (``transformer_plan``).

vfm-models never imports vfm-parallel (nor the reverse). A model's ``parallel_plan()`` returns this
plain description; vfm-parallel reads its fields by name. Module paths are dotted attribute paths;
paths inside ``tp`` and ``attention`` are relative to one transformer block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping

from vfm_models.blocks.mlp import mlp_tp_plan
from vfm_plugins import PluginError

TP_STYLES = ("colwise", "rowwise")
ATTENTION_KINDS = ("full", "spatial", "temporal", "cross")


@dataclass(frozen=True)
class ParallelPlan:
    #: Dotted path of the ``nn.ModuleList`` of transformer blocks: FSDP and activation-checkpointing
    #: units, and the places where a pipeline may cut (between blocks).
    blocks: str
    #: Linear layers inside a block -> "colwise" | "rowwise" (Megatron-style TP pairs).
    tp: Mapping[str, str] = field(default_factory=dict)
    #: Attention-core modules inside a block -> "full" | "spatial" | "temporal" | "cross". Each core
    #: has the call signature of ``vfm_models.blocks.attention.AttentionCore``; CP strategies swap it.
    attention: Mapping[str, str] = field(default_factory=dict)
    #: Top-level modules that turn conditioning (timestep, class, text) into embeddings. Under PP they
    #: live on every stage, are initialised identically and have their gradients all-reduced.
    conditioning: tuple[str, ...] = ()
    #: Top-level modules run before the first block (patch embedding) and after the last (final layer).
    pre_blocks: tuple[str, ...] = ()
    post_blocks: tuple[str, ...] = ()
    num_heads: int = 1
    num_kv_heads: int = 1
    num_layers: int = 1
    #: Per-block exceptions to ``attention``: block index -> {core path: kind} (ST-DiT blocks with
    #: full self-attention). Use :meth:`attention_for` to get the kinds of one block.
    attention_overrides: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    #: True where text tokens padded on with ``text_mask`` False change no output (the attention masks
    #: them), so vfm-parallel's ``compile`` may pad captions to a few bucket lengths. False (unknown)
    #: by default; a model that attends to every text token (Wan as trained) keeps False.
    masks_text_padding: bool = False

    def attention_for(self, index: int) -> dict:
        """Core path -> kind for block ``index`` (``attention`` with that block's overrides applied)."""
        return {**self.attention, **self.attention_overrides.get(index, {})}

    def __post_init__(self) -> None:
        bad_tp = {k: v for k, v in self.tp.items() if v not in TP_STYLES}
        if bad_tp:
            raise ValueError(f"tp styles must be one of {TP_STYLES}; got {bad_tp}")
        kinds = dict(self.attention)
        for overrides in self.attention_overrides.values():
            kinds.update(overrides)
        bad_attn = {k: v for k, v in kinds.items() if v not in ATTENTION_KINDS}
        if bad_attn:
            raise ValueError(f"attention kinds must be one of {ATTENTION_KINDS}; got {bad_attn}")


class ParallelPlanMissingError(PluginError, NotImplementedError):
    """A family's model class that does not define ``parallel_plan()``: the family author's mistake.
    A :class:`~vfm_plugins.PluginError`, so ``vfm`` prints it as one ``error:`` line. Built by
    :meth:`of`; the instance holds only its message, so it pickles (ranks hand errors back pickled)."""

    @classmethod
    def of(cls, model) -> "ParallelPlanMissingError":
        """The error for ``model``, naming its family, its class and what to define."""
        model_cls = type(model)
        families = _families_building(model)
        path = f"{model_cls.__module__}.{model_cls.__qualname__}"
        who = f"family {' or '.join(map(repr, families))} builds {path}, which" if families else path
        if hasattr(model, "conditioning_modules"):  # a DiffusionTransformer: the shared builder fits it
            how = ("return transformer_plan(self, {'attn.core': 'full'}), each attention core 'full', 'spatial', "
                   "'temporal' or 'cross'")
        else:  # a plain nn.Module: transformer_plan reads DiffusionTransformer's parts, which it lacks
            how = ("return ParallelPlan(blocks='<dotted path of its nn.ModuleList of blocks>', num_heads=..., "
                   "num_layers=...); a DiffusionTransformer subclass can return transformer_plan(self, "
                   "{'attn.core': 'full'})")
        return cls(
            f"{who} does not define parallel_plan(): define parallel_plan(self) in {model_cls.__name__} returning a "
            f"vfm_models.families.plan.ParallelPlan that says how vfm-parallel may split it ({how}); vfm train and "
            f"vfm plan read it even in one process (docs/plugins.md)")


class FamilyBuildError(PluginError, TypeError):
    """A family's ``build(config)`` returned something other than an ``nn.Module``: the family author's
    mistake (``vfm`` prints it as one ``error:`` line)."""


def parallel_plan_of(model, family: str | None = None) -> ParallelPlan:
    """``model.parallel_plan()``; a model whose class has none (a family built on a plain ``nn.Module``,
    where ``nn.Module.__getattr__`` would raise a bare AttributeError) is :class:`ParallelPlanMissingError`.
    ``family``, the name ``model`` was built from, names it where ``model`` is no ``nn.Module`` at all
    (:class:`FamilyBuildError`: the advice to define ``parallel_plan()`` in ``str`` misled)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        who = "a family's build"
        if family is not None:
            import vfm_models

            entry = vfm_models.host.entry("families", family)
            who = f"family {family!r} (from {entry.provider} {entry.version}): its build"
        from vfm_plugins.text import repr_start

        raise FamilyBuildError(f"{who} returned a {type(model).__module__}.{type(model).__qualname__} "
                               f"({repr_start(model)}), not an nn.Module; build(config) "
                               "must return the model")
    if not callable(getattr(type(model), "parallel_plan", None)):
        raise ParallelPlanMissingError.of(model)
    return model.parallel_plan()


def _families_building(model) -> list[str]:
    """The registered families whose ``build`` is the model's class or whose ``config_cls`` is its
    config's (a family built by a factory function): only for an error message, so a family that
    fails to load is passed over."""
    import vfm_models

    by_class, by_config = [], []
    for name in vfm_models.host.names("families"):
        try:
            family = vfm_models.host.get("families", name)
        except Exception:  # noqa: BLE001 - another plugin's broken family must not hide this error
            continue
        if family.build is type(model):
            by_class.append(name)
        elif family.config_cls is type(getattr(model, "config", None)):
            by_config.append(name)
    # a family whose build is the class says it best; a shared config class (TransformerConfig) would
    # otherwise name every built-in family that uses it as well
    return by_class or by_config


def attention_tp(prefix: str) -> Dict[str, str]:
    """q/k/v projections are column-parallel (heads split), the output projection row-parallel."""
    return {f"{prefix}.q": "colwise", f"{prefix}.k": "colwise", f"{prefix}.v": "colwise", f"{prefix}.o": "rowwise"}


def transformer_plan(model, attention: Dict[str, str], overrides=None, *, masks_text_padding: bool = True) -> ParallelPlan:
    """The plan of a ``DiffusionTransformer``: TP pairs for every attention in ``attention`` and the MLP.
    Its cross-attention masks the keys ``text_mask`` marks False, hence ``masks_text_padding`` True
    unless the model drops the mask."""
    cfg = model.config
    tp: Dict[str, str] = {}
    for core_path in attention:
        tp.update(attention_tp(core_path.rsplit(".", 1)[0]))
    tp.update(mlp_tp_plan(cfg.mlp))
    return ParallelPlan(
        blocks="blocks",
        tp=tp,
        attention=attention,
        attention_overrides=overrides or {},
        conditioning=model.conditioning_modules(),
        pre_blocks=("x_embedder",),
        post_blocks=("final_layer",),
        num_heads=cfg.num_heads,
        num_kv_heads=cfg.kv_heads,
        num_layers=cfg.depth,
        masks_text_padding=masks_text_padding,
    )
