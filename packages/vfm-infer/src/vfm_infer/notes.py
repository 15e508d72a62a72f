"""What a request asks for that will not show in the video: a prompt, negative prompt or guidance
scale the model does not use, or a prompt cut at the text encoder's length. Warnings, not errors:
the request still generates (e.g. N videos of an unconditional model from N lines of a file)."""

from __future__ import annotations

from typing import Any, Sequence


class GenerationWarning(UserWarning):
    """Something to know before looking at the videos; ``vfm generate`` prints each as ``warning:``."""


class UnusedInputWarning(GenerationWarning):
    """A prompt, negative prompt or guidance scale that cannot change the video."""


class PromptTruncatedWarning(GenerationWarning):
    """A prompt longer than the text encoder reads: the words past its ``max_length`` are dropped."""


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def unused_inputs(kind: str, prompts: Sequence[str], negative_prompt: str, asked_guidance: float | None,
                  guidance: float) -> list[str]:
    """Notes for inputs that do nothing: ``kind`` is the conditioning (``text``, ``class``, ``none``),
    ``asked_guidance`` the scale the caller gave (None: the export's), ``guidance`` the one in use."""
    if kind == "none":
        ignored = [what for what, given in (("the prompts", any(p.strip() for p in prompts)),
                                             ("--negative-prompt", bool(negative_prompt)),
                                             (f"--guidance {asked_guidance}", asked_guidance not in (None, 1.0)))
                   if given]
        if not ignored:
            return []
        return [f"this model is unconditional: {', '.join(ignored)} cannot change its videos (it was trained "
                "without prompts; each prompt still gets its own video, with seed + its index)"]
    if negative_prompt and guidance == 1.0:
        where = "the export's default guidance is 1" if asked_guidance is None else "--guidance is 1"
        return [f"--negative-prompt {_short(negative_prompt)} has no effect: {where} (guidance off), and the "
                "negative prompt only replaces the unconditional branch of guidance; pass --guidance > 1"]
    return []


def prompt_tokens(encoder: Any, text: str) -> tuple[int, bool] | None:
    """(tokens, exact) for ``text`` under ``encoder``: the untruncated count from a Hugging Face
    tokenizer (exact), or the encoder's own (truncated) ``tokenize`` (not exact: it stops at the
    limit); None when the encoder offers neither."""
    tokenizer = getattr(encoder, "tokenizer", None)
    if callable(tokenizer):
        return len(tokenizer(text, truncation=False)["input_ids"]), True
    tokenize = getattr(encoder, "tokenize", None)
    if callable(tokenize):
        return len(tokenize(text)), False
    return None


def truncated_prompts(encoder: Any, prompts: Sequence[str], negative_prompt: str = "") -> list[str]:
    """One note per prompt (and the negative prompt) that reaches the encoder's ``max_length``."""
    limit = getattr(encoder, "max_length", None)
    if encoder is None or not isinstance(limit, int):
        return []
    notes, seen = [], set()
    named = [(f"prompt {i} (video {i:04d})", p) for i, p in enumerate(prompts)] + ([("--negative-prompt", negative_prompt)] if negative_prompt else [])
    for what, text in named:
        if text in seen:
            continue
        counted = prompt_tokens(encoder, text)
        if counted is None:
            continue
        tokens, exact = counted
        if tokens > limit or (not exact and tokens >= limit):
            seen.add(text)
            size = f"is {tokens} tokens" if exact else "reaches"
            notes.append(f"{what} ({_short(text)}) {size} the {limit} tokens the text encoder reads "
                         f"(its max_length); the words past them are not seen by the model")
    return notes

