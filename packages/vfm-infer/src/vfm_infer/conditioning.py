"""Prompts to the model's ``cond`` dict, and the unconditional counterpart for CFG.

Three kinds of model (docs/contracts.md section 1): text-conditional (config ``text_dim`` > 0:
``{"text", "text_mask"}`` from the export's text encoder), class-conditional (``num_classes`` > 0:
the prompt is a class index) and unconditional (no cond; guidance does not apply).

The unconditional branch is the null condition that training's condition dropout used
(:mod:`vfm_models.conditioning`: the null class, or the text encoder's embedding of the empty
caption), recorded in the export as ``null_condition``, in the form dropout fed it (text padded to the
prompt's tokens: :func:`vfm_models.conditioning.null_for`); a negative prompt replaces it.
"""

from __future__ import annotations

import functools
import warnings

from typing import Any, Mapping, Sequence

import torch

Cond = dict[str, torch.Tensor]


def conditioning_kind(config: Any) -> str:
    """``"text"``, ``"class"`` or ``"none"`` from a family config."""
    from vfm_models.conditioning import kind_of

    return kind_of(config)


def load_text_encoder(meta: Mapping[str, Any], device: torch.device | str = "cpu"):
    """The export's text encoder (``meta["text_encoder"]`` with its options), or None. Seeded as
    training and sharding build it (:func:`vfm_models.seeded.build_seeded`), so that an encoder
    without weights is the same one."""
    name = meta.get("text_encoder")
    if not name:
        return None
    import vfm_models
    from vfm_models.seeded import build_seeded

    # build_text_encoder: an unknown option is named with the accepted ones
    encoder = build_seeded(functools.partial(vfm_models.build_text_encoder, name), meta.get("text_encoder_options"))
    return encoder.to(device) if hasattr(encoder, "to") else encoder


def _encode_text(encoder, prompts: list[str], device) -> Cond:
    from vfm_models.conditioning import encode_text
    from vfm_models.text_encoders.truncation import TextTruncatedWarning

    # the pipeline's check (checks.truncated_prompts) named the prompts past max_length in one note already;
    # the encoder's own once-per-encoder warning would say it a second time, without the prompts' names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TextTruncatedWarning)
        text, mask = encode_text(encoder, prompts)
    return {"text": text.to(device), "text_mask": mask.to(device)}


def parse_class_label(prompt: str, num_classes: int) -> int:
    """A class-conditional model's prompt is a class index in [0, num_classes)."""
    try:
        label = int(prompt)
    except ValueError:
        raise ValueError(
            f"this model is class-conditional: the prompt must be a class index in [0, {num_classes}), got {prompt!r}"
        ) from None
    if not 0 <= label < num_classes:
        raise ValueError(f"class index {label} is out of range; this model has classes 0..{num_classes - 1}")
    return label


class Conditioner:
    """Builds (cond, uncond) for one prompt; ``uncond`` is None when guidance cannot apply.

    ``null``: the export's ``null_condition``; it must describe this model's null condition
    (:func:`vfm_models.conditioning.describe`), and is taken from the config when not given.
    """

    def __init__(self, config: Any, text_encoder=None, device: torch.device | str = "cpu",
                 null: Mapping[str, Any] | None = None) -> None:
        from vfm_models.conditioning import null_condition, null_condition_problem

        self.kind = conditioning_kind(config)
        self.config = config
        self.device = device
        self.text_encoder = text_encoder
        if self.kind == "text" and text_encoder is None:
            raise ValueError("this model is text-conditional but its export names no text_encoder")
        problem = None if null is None else null_condition_problem(null, config)
        if problem:
            raise ValueError(problem)
        base = null_condition(config, text_encoder)
        self.null: Cond | None = _moved(base, device)

    def check(self, prompt: str, negative_prompt: str = "") -> None:
        """Raise on a prompt this model cannot take (before any work starts)."""
        if self.kind == "class":
            parse_class_label(prompt, self.config.num_classes)
            if negative_prompt:
                parse_class_label(negative_prompt, self.config.num_classes)

    def __call__(self, prompt: str, negative_prompt: str = "") -> tuple[Cond, Cond | None]:
        """(cond, uncond): ``uncond`` is the null condition as condition dropout fed it in place of
        this prompt (:func:`vfm_models.conditioning.null_for`: a text null zero-padded to the prompt's
        tokens, which a model attending to its padding sees), or ``negative_prompt`` when given (a
        class index for class-conditional models)."""
        from vfm_models.conditioning import null_for

        if self.kind == "text":
            cond = _encode_text(self.text_encoder, [prompt], self.device)
            if negative_prompt:
                return cond, _encode_text(self.text_encoder, [negative_prompt], self.device)
            return cond, null_for(cond, self.null)
        if self.kind == "class":
            cond = {"y": torch.tensor([parse_class_label(prompt, self.config.num_classes)], device=self.device)}
            if negative_prompt:
                return cond, {"y": torch.tensor([parse_class_label(negative_prompt, self.config.num_classes)], device=self.device)}
            return cond, null_for(cond, self.null)
        return {}, None

    def to(self, device: torch.device | str) -> "Conditioner":
        """Move the text encoder and the null condition to ``device``, in place (as ``nn.Module.to``);
        returns self. The conditions it makes are then on ``device``."""
        if self.text_encoder is not None and hasattr(self.text_encoder, "to"):
            self.text_encoder = self.text_encoder.to(device)
        self.null = _moved(self.null, device)
        self.device = device
        return self

    def precomputed(self, prompts: Sequence[str], negative_prompt: str = "") -> "PrecomputedConditioner":
        """A conditioner for ``prompts`` alone (each with ``negative_prompt``) that answers from their
        conditions, made here once and kept on the CPU, and holds no text encoder: a caller that
        generates the same prompts again and again (``vfm train``'s previews) drops the encoder after this."""
        return PrecomputedConditioner(self, prompts, negative_prompt)


def _moved(cond: Cond | None, device: torch.device | str) -> Cond | None:
    """``cond``'s tensors on ``device`` (None stays None)."""
    return None if cond is None else {k: v.to(device) for k, v in cond.items()}


def _on_cpu(cond: Cond | None) -> Cond | None:
    return _moved(None if cond is None else {k: v.detach() for k, v in cond.items()}, "cpu")


class PrecomputedConditioner(Conditioner):
    """The (cond, uncond) of given prompts, made once by a :class:`Conditioner` and kept on the CPU (a
    text model's embeddings: prompts x max_length x text_dim values, small beside the encoder that made
    them), moved to ``device`` when asked for. Holds no text encoder (``text_encoder`` is None); another
    prompt is refused by :meth:`check`, naming the ones it holds. Made by :meth:`Conditioner.precomputed`."""

    def __init__(self, source: Conditioner, prompts: Sequence[str], negative_prompt: str = "") -> None:
        # not Conditioner.__init__: that builds the null condition with the encoder this class is without
        self.kind, self.config, self.device, self.text_encoder = source.kind, source.config, source.device, None
        self.null = _on_cpu(source.null)
        self.conditions: dict[tuple[str, str], tuple[Cond, Cond | None]] = {}
        for prompt in prompts:
            key = (prompt, negative_prompt)
            if key not in self.conditions:
                source.check(prompt, negative_prompt)
                cond, uncond = source(prompt, negative_prompt)
                self.conditions[key] = (_on_cpu(cond), _on_cpu(uncond))

    def to(self, device: torch.device | str) -> "PrecomputedConditioner":
        """Answer on ``device`` from now on (the conditions stay on the CPU, moved per call); returns self."""
        self.device = device
        return self

    def check(self, prompt: str, negative_prompt: str = "") -> None:
        """Raise on a prompt (with this negative prompt) whose conditions were not made beforehand."""
        if (prompt, negative_prompt) not in self.conditions:
            held = ", ".join(repr(p) if not n else f"{p!r} (negative {n!r})" for p, n in self.conditions)
            raise ValueError(f"this conditioner holds the conditions of the prompts given when it was made, without a "
                             f"text encoder; prompt {prompt!r}" + (f" with negative prompt {negative_prompt!r}" if negative_prompt
                                                                   else "") + f" is not one of them; accepted: {held}")

    def __call__(self, prompt: str, negative_prompt: str = "") -> tuple[Cond, Cond | None]:
        """(cond, uncond) of ``prompt`` as the conditioner that made them gave them, on ``device``."""
        self.check(prompt, negative_prompt)
        cond, uncond = self.conditions[(prompt, negative_prompt)]
        return _moved(cond, self.device), _moved(uncond, self.device)
