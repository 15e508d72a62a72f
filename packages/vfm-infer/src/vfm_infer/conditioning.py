"""Prompts to the model's ``cond`` dict, and the unconditional (empty or negative) counterpart for CFG.

Three kinds of model (docs/contracts.md section 1): text-conditional (config ``text_dim`` > 0:
``{"text", "text_mask"}`` from the export's text encoder), class-conditional (``num_classes`` > 0:
the prompt is a class index, and the null class ``num_classes`` is the unconditional input) and
unconditional (no cond; guidance does not apply).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

Cond = dict[str, torch.Tensor]


def conditioning_kind(config: Any) -> str:
    """``"text"``, ``"class"`` or ``"none"`` from a family config."""
    if getattr(config, "text_dim", 0):
        return "text"
    if getattr(config, "num_classes", 0):
        return "class"
    return "none"


def load_text_encoder(meta: Mapping[str, Any], device: torch.device | str = "cpu"):
    """The export's text encoder (``meta["text_encoder"]`` with its options), or None."""
    name = meta.get("text_encoder")
    if not name:
        return None
    import vfm_models

    encoder = vfm_models.get_text_encoder(name)(**(meta.get("text_encoder_options") or {}))
    return encoder.to(device) if hasattr(encoder, "to") else encoder


def _encode_text(encoder, prompts: list[str], device) -> Cond:
    out = encoder.encode(prompts) if hasattr(encoder, "encode") else encoder(prompts)
    if isinstance(out, Mapping):
        text, mask = out["text"], out.get("text_mask")
    else:
        text, mask = out
    if mask is None:
        mask = torch.ones(text.shape[:2], dtype=torch.bool)
    return {"text": text.float().to(device), "text_mask": mask.bool().to(device)}


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
    """Builds (cond, uncond) for one prompt; ``uncond`` is None when guidance cannot apply."""

    def __init__(self, config: Any, text_encoder=None, device: torch.device | str = "cpu") -> None:
        self.kind = conditioning_kind(config)
        self.config = config
        self.device = device
        self.text_encoder = text_encoder
        if self.kind == "text" and text_encoder is None:
            raise ValueError("this model is text-conditional but its export names no text_encoder")

    def check(self, prompt: str) -> None:
        """Raise on a prompt this model cannot take (before any work starts)."""
        if self.kind == "class":
            parse_class_label(prompt, self.config.num_classes)

    def __call__(self, prompt: str, negative_prompt: str = "") -> tuple[Cond, Cond | None]:
        if self.kind == "text":
            cond = _encode_text(self.text_encoder, [prompt], self.device)
            uncond = _encode_text(self.text_encoder, [negative_prompt], self.device)
            return cond, uncond
        if self.kind == "class":
            y = parse_class_label(prompt, self.config.num_classes)
            null = torch.tensor([self.config.num_classes], device=self.device)
            return {"y": torch.tensor([y], device=self.device)}, {"y": null}
        return {}, None
