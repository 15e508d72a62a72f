"""The null condition: what a model sees when its condition is dropped in training (condition
dropout) and what classifier-free guidance contrasts against at inference. Defined once, here.

- class-conditional (``num_classes`` > 0): the null class, label ``num_classes`` (the extra, last
  row of the label table), as in DiT;
- text-conditional (``text_dim`` > 0): the text encoder's embedding of the empty caption ``""``
  (with its mask), as in Stable Diffusion. It is the encoder's own output, so it needs no
  parameters of its own and is the same tensor in training and at inference; for ``hash`` and T5
  it is the end token alone. A negative prompt replaces it at inference;
- unconditional: none.

Guidance contrasts a prompt with :func:`null_for` (the null as :func:`with_null` substitutes it
for that prompt), so the unconditional branch is an input condition dropout trained on.

The inference export records the description (:func:`describe`) under ``null_condition`` and the
training ``cond_dropout`` beside it, so that guidance knows whether the null was ever trained.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

#: The caption whose embedding is the null condition of text-conditional models.
NULL_CAPTION = ""


def _family_config(config: Any) -> Any:
    """A family config as given, or a model's ``config`` (a model has no ``text_dim`` of its own, so it
    would read as unconditional)."""
    return getattr(config, "config", config) if isinstance(config, torch.nn.Module) else config


def kind_of(config: Any) -> str:
    """``"text"``, ``"class"`` or ``"none"`` from a family config, or from a model (its ``config``)."""
    config = _family_config(config)
    if getattr(config, "text_dim", 0):
        return "text"
    if getattr(config, "num_classes", 0):
        return "class"
    return "none"


def describe(config: Any) -> dict[str, Any]:
    """The null condition as JSON for the export: ``{"kind": "class", "label": N}``,
    ``{"kind": "text", "caption": ""}`` or ``{"kind": "none"}``, of a family config or a model."""
    config = _family_config(config)
    kind = kind_of(config)
    if kind == "class":
        return {"kind": "class", "label": int(config.num_classes)}
    if kind == "text":
        return {"kind": "text", "caption": NULL_CAPTION}
    return {"kind": "none"}


def null_condition_problem(null: Any, config: Any) -> str | None:
    """Why an export's recorded ``null_condition`` is not the one of ``config`` (:func:`describe`), or None:
    guidance would contrast against a condition the model was not trained with."""
    expected = describe(config)
    if isinstance(null, Mapping) and dict(null) == expected:
        return None
    shown = dict(null) if isinstance(null, Mapping) else null
    return f"the export's null_condition {shown} does not match its model config, whose null condition is {expected}"


def encode_text(encoder: Any, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(text (B, L, D) float32, mask (B, L) bool) from a text encoder (``encode`` or a call; a
    mapping or a (text, mask) pair; no mask means every token is real)."""
    out = encoder.encode(captions) if hasattr(encoder, "encode") else encoder(captions)
    if isinstance(out, Mapping):
        text, mask = out["text"], out.get("text_mask")
    elif isinstance(out, (tuple, list)):
        text, mask = out
    else:
        text, mask = out, None
    for what, value in (("text", text), ("mask", mask)):
        if not isinstance(value, torch.Tensor) and not (what == "mask" and value is None):
            # a plugin encoder's numpy arrays failed as "'numpy.ndarray' object has no attribute 'float'"
            import vfm_models
            from vfm_plugins import PluginResultError

            raise PluginResultError(
                f"{vfm_models.host.registered_as('text_encoders', encoder)}: encode returned its {what} as a "
                f"{type(value).__module__}.{type(value).__qualname__}; a text encoder's encode returns (text (B, L, D), "
                f"mask (B, L) bool), both torch.Tensor (or the text alone: every token real)")
    if mask is None:
        mask = torch.ones(text.shape[:2], dtype=torch.bool)
    return text.float(), mask.bool()


def null_condition(config: Any, text_encoder: Any = None) -> dict[str, torch.Tensor] | None:
    """The null condition of one sample (batch 1), or None for an unconditional model.

    Text-conditional models need the ``text_encoder`` the training data was encoded with.
    """
    config = _family_config(config)
    kind = kind_of(config)
    if kind == "class":
        return {"y": torch.tensor([int(config.num_classes)])}
    if kind == "text":
        if text_encoder is None:
            raise ValueError("the null condition of a text-conditional model is its text encoder's embedding of "
                             "the empty caption; pass the text encoder")
        text, mask = encode_text(text_encoder, [NULL_CAPTION])
        if text.shape[-1] != config.text_dim:
            raise ValueError(f"the text encoder gives {text.shape[-1]}-wide embeddings but the model's text_dim is {config.text_dim}")
        return {"text": text, "text_mask": mask}
    return None


def _pad_tokens(t: torch.Tensor, length: int) -> torch.Tensor:
    """(B, L, ...) zero/False-padded to (B, length, ...)."""
    if t.shape[1] == length:
        return t
    return torch.cat([t, t.new_zeros((t.shape[0], length - t.shape[1], *t.shape[2:]))], dim=1)


def with_null(cond: Mapping[str, torch.Tensor], null: Mapping[str, torch.Tensor], drop: torch.Tensor) -> dict[str, torch.Tensor]:
    """``cond`` (batch B) with the samples where ``drop`` (B,) bool is True replaced by ``null`` (batch 1).

    Text of different lengths is padded (zeros, mask False) to the longer of the two.
    """
    out = dict(cond)
    if "y" in null:
        y = cond["y"]
        out["y"] = torch.where(drop.to(y.device), null["y"].to(y.device, y.dtype), y)
    if "text" in null:
        text = cond["text"]
        mask = cond.get("text_mask")
        mask = torch.ones(text.shape[:2], dtype=torch.bool, device=text.device) if mask is None else mask.bool()
        length = max(text.shape[1], null["text"].shape[1])
        null_text = _pad_tokens(null["text"].to(text.device, text.dtype), length)
        null_mask = _pad_tokens(null["text_mask"].to(mask.device), length)
        d = drop.to(text.device)
        out["text"] = torch.where(d[:, None, None], null_text, _pad_tokens(text, length))
        out["text_mask"] = torch.where(d[:, None], null_mask, _pad_tokens(mask, length))
    return out


def null_for(cond: Mapping[str, torch.Tensor], null: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The null condition as condition dropout feeds it in place of every sample of ``cond``
    (:func:`with_null` with all of them dropped): a text null zero-padded, mask False, to ``cond``'s
    token length, as training pads it to its batch's captions. Guidance's unconditional branch for
    ``cond`` is this, not ``null`` alone: a model that attends to its text padding (``wan`` without
    ``use_text_mask``) never trained on the empty caption at its own length beside longer captions."""
    some = next(v for v in cond.values() if isinstance(v, torch.Tensor))
    # made on cond's device: with_null moves drop there, a host-to-device copy per call otherwise
    return with_null(cond, null, torch.ones(some.shape[0], dtype=torch.bool, device=some.device))
