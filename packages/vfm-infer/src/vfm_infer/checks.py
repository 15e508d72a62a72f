"""Checks of a generation request beside :func:`vfm_infer.pipeline.check_spec`: field types (errors), and
what a request asks for that will not show in the video (warnings, not errors: the request still
generates, e.g. N videos of an unconditional model from N lines of a file): a prompt, negative prompt
or guidance scale the model does not use, a prompt cut at the text encoder's length, guidance against
a null condition that never trained."""

from __future__ import annotations

from typing import Any, Sequence

from vfm_plugins import Notice


class GenerationWarning(Notice):
    """Something to know before looking at the videos; ``vfm generate`` prints each as ``warning:``."""


class UnusedInputWarning(GenerationWarning):
    """A prompt, negative prompt or guidance scale that cannot change the video."""


class PromptTruncatedWarning(GenerationWarning):
    """A prompt longer than the text encoder reads: the words past its ``max_length`` are dropped."""


class UntrainedNullWarning(GenerationWarning):
    """Guidance against the null condition of a model trained without condition dropout."""


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def unused_inputs(kind: str, prompts: Sequence[str], negative_prompt: str, asked_guidance: float | None,
                  guidance: float) -> list[str]:
    """Notes for inputs that do nothing: ``kind`` is the conditioning (``text``, ``class``, ``none``),
    ``asked_guidance`` the scale the caller gave (None: the export's), ``guidance`` the one in use."""
    if kind == "none":
        ignored = [what for what, given in (("the prompts", any(p.strip() for p in prompts)),
                                             ("--negative-prompt", bool(negative_prompt))) if given]
        if asked_guidance not in (None, 1.0):  # named as given, 0 included; 1 is off, the default
            ignored.append(f"--guidance {asked_guidance:g}")
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
    if not isinstance(limit, int):  # also no encoder (None)
        return []
    notes, seen = [], set()
    named = [(f"prompt {i} (video {i:04d})", p) for i, p in enumerate(prompts)] + ([("--negative-prompt", negative_prompt)] if negative_prompt else [])
    for what, text in named:
        if text in seen:  # a text is counted (tokenized) and noted once, however often it is given
            continue
        seen.add(text)
        counted = prompt_tokens(encoder, text)
        if counted is None:
            continue
        tokens, exact = counted
        if tokens > limit or (not exact and tokens >= limit):
            size = f"is {tokens} tokens, more than" if exact else "reaches"
            notes.append(f"{what} ({_short(text)}) {size} the {limit} tokens the text encoder reads "
                         f"(its max_length); the model does not see the words past them")
    return notes


def check_spec_types(spec: Any) -> None:
    """A ``GenerationSpec`` field of the wrong type (e.g. ``seed=1.5``, ``guidance="2"``, ``size=(16,)``) is a
    ValueError naming the field and what it takes, instead of a TypeError deep in torch."""

    def integer(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    problems = []
    if not integer(spec.seed):
        problems.append(f"seed must be an integer, got {spec.seed!r}")
    if spec.guidance is not None and not number(spec.guidance):
        problems.append(f"guidance must be a number (1 = off) or None for the export's, got {spec.guidance!r}")
    if spec.frames is not None and not integer(spec.frames):
        problems.append(f"frames must be an integer or None for the training clips' length, got {spec.frames!r}")
    if spec.size is not None and not (isinstance(spec.size, (tuple, list)) and len(spec.size) == 2
                                      and all(integer(v) for v in spec.size)):
        problems.append(f"size must be (height, width) in whole pixels or None for the training size, got {spec.size!r}")
    if not isinstance(spec.negative_prompt, str):
        problems.append(f"negative_prompt must be a string ('' for none), got {spec.negative_prompt!r}")
    for name in ("decode_tile", "decode_chunk_frames"):
        if getattr(spec, name) is not None and not integer(getattr(spec, name)):
            problems.append(f"{name} must be an integer or None, got {getattr(spec, name)!r}")
    if problems:
        raise ValueError("; ".join(problems))


def untrained_null(kind: str, cond_dropout: Any, negative_prompt: str, asked_guidance: float | None) -> list[str]:
    """A note when the caller asks for guidance (scale other than 1) against a null condition that training
    never showed the model (the export records ``cond_dropout`` 0): the unconditional branch is then
    an input it never saw, and guiding away from it extrapolates towards noise. A negative prompt is a
    condition the model did train on, so it is fine."""
    if kind == "none" or cond_dropout is None or float(cond_dropout) > 0 or negative_prompt:
        return []
    if asked_guidance is None or asked_guidance == 1.0:
        return []
    # scale 0 is the unconditional branch alone (uncond + 0 * (cond - uncond)); others extrapolate from it
    what = "generates from the null condition alone," if asked_guidance == 0.0 else "guides against"
    return [f"this model was trained without condition dropout (cond_dropout 0 in its export), so its null condition "
            f"never trained: --guidance {asked_guidance:g} {what} an input the model never saw (expect noise); "
            "use --guidance 1 (guidance off: the conditional branch alone), or give a --negative-prompt as the other branch"]
