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


class NegativeGuidanceWarning(GenerationWarning):
    """A guidance scale below 0: defined (it steers away from the prompt) but rarely what is meant."""


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


def _scale_named(asked_guidance: float | None, guidance: float) -> str:
    """The scale in use as the user set it: ``--guidance 3``, or the export's default when none was given."""
    return f"--guidance {guidance:g}" if asked_guidance is not None else f"the export's default guidance {guidance:g}"


def negative_guidance(kind: str, asked_guidance: float | None, guidance: float) -> list[str]:
    """A note for a scale below 0 on a conditional model, the caller's (``asked_guidance``) or the export's
    default (``guidance``, in use). ``uncond + scale * (cond - uncond)`` is still defined there (it
    extrapolates past the unconditional prediction, away from the prompt), so it generates; but
    ``--guidance -3`` more often means a negative prompt, or is a typo. An unconditional model ignores
    guidance (:func:`unused_inputs` says so)."""
    if kind == "none" or guidance >= 0:
        return []
    return [f"{_scale_named(asked_guidance, guidance)} is below 0: it steers the video away from its prompt (uncond + "
            "scale * (cond - uncond)), which is rarely meant; to steer away from something, give it as --negative-prompt "
            "with --guidance above 1 (1 = off, 0 = the unconditional branch alone)"]


def prompt_tokens(encoder: Any, text: str) -> tuple[int, bool] | None:
    """(tokens, exact) for ``text`` under ``encoder``: the untruncated count from the encoder's
    ``count_tokens`` (vfm-models' encoders) or a Hugging Face tokenizer (exact), or the encoder's own
    (truncated) ``tokenize`` (not exact: it stops at the limit); None when the encoder offers none."""
    count = getattr(encoder, "count_tokens", None)
    if callable(count):
        return int(count(text)), True
    tokenizer = getattr(encoder, "tokenizer", None)
    if callable(tokenizer):
        return len(tokenizer(text, truncation=False)["input_ids"]), True
    tokenize = getattr(encoder, "tokenize", None)
    if callable(tokenize):
        return len(tokenize(text)), False
    return None


def truncated_prompts(encoder: Any, prompts: Sequence[str], negative_prompt: str = "", shown: int = 3) -> list[str]:
    """One note for all the prompts (and the negative prompt) past the encoder's ``max_length``, naming the
    first ``shown`` of them with the tokens each keeps and drops (a prompts file of long lines gave one
    line per prompt); none when every prompt fits."""
    limit = getattr(encoder, "max_length", None)
    if not isinstance(limit, int):  # also no encoder (None)
        return []
    cut, seen = [], set()
    named = [(f"prompt {i} (video {i:04d})", p) for i, p in enumerate(prompts)] + ([("--negative-prompt", negative_prompt)] if negative_prompt else [])
    for what, text in named:
        if text in seen:  # a text is counted (tokenized) and noted once, however often it is given
            continue
        seen.add(text)
        counted_tokens = prompt_tokens(encoder, text)
        if counted_tokens is None:
            continue
        tokens, exact = counted_tokens
        if tokens > limit:
            cut.append(f"{what} ({_short(text)}) is {tokens} tokens: it keeps {limit} and drops {tokens - limit}")
        elif not exact and tokens >= limit:
            cut.append(f"{what} ({_short(text)}) reaches the limit: it keeps {limit} and drops the rest")
    if not cut:
        return []
    more = f"; and {len(cut) - shown} more" if len(cut) > shown else ""
    head = (f"{len(cut)} prompts are" if len(cut) > 1 else "a prompt is") + " longer than"
    return [f"{head} the {limit} tokens the text encoder reads (its max_length), and the model does not see the words "
            f"past them: {'; '.join(cut[:shown])}{more}"]


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


def _names(indices: Sequence[int], prompts: Sequence[str], limit: int = 3) -> str:
    """``prompt 0 (video 0000) ''`` or ``prompts 0, 2 (videos 0000, 0002) and 5 more``."""
    shown = indices[:limit]
    more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
    if len(indices) == 1:
        return f"prompt {shown[0]} (video {shown[0]:04d}) {_short(prompts[shown[0]])}"
    return (f"prompts {', '.join(map(str, shown))} (videos {', '.join(f'{i:04d}' for i in shown)}){more}")


def _same_condition(cond: Any, uncond: Any) -> bool:
    """Whether the two condition dicts are the same model input, tensor for tensor."""
    import torch

    if uncond is None or cond.keys() != uncond.keys():
        return False
    if any(t.is_meta for t in (*cond.values(), *uncond.values())):
        return False  # a pipeline built on the meta device (placement checks) holds no values to compare
    return all(cond[k].shape == uncond[k].shape and torch.equal(cond[k], uncond[k].to(cond[k].device)) for k in cond)


def guidance_without_contrast(conditioner: Any, prompts: Sequence[str], negative_prompt: str,
                              asked_guidance: float | None, guidance: float) -> list[str]:
    """A note naming the prompts whose condition *is* the unconditional branch (an empty prompt, which a
    text model's null condition is the embedding of, or a prompt equal to the negative prompt): guidance
    ``uncond + scale * (cond - uncond)`` is then ``cond`` at every scale, so ``guidance`` cannot change
    their videos. Exact: the two conditions are compared as the model would get them. Only the
    prompts that can match are encoded (those with the unconditional prompt's token count, or blank
    ones for an encoder that cannot count), so a long prompts file is not encoded twice."""
    if conditioner.kind == "none" or guidance in (0.0, 1.0):  # 1 is off, 0 the unconditional branch by request
        return []
    encoder = conditioner.text_encoder
    counts: dict[str, Any] = {}

    def count(text: str) -> Any:
        if text not in counts:
            counted = prompt_tokens(encoder, text) if encoder is not None else None
            counts[text] = None if counted is None else counted[0]
        return counts[text]

    def may_match(text: str) -> bool:
        if conditioner.kind != "text":
            return True  # a class index: nothing to encode
        if count(negative_prompt) is None:
            return text.strip() == negative_prompt.strip()
        return count(text) == count(negative_prompt)

    same, seen = [], {}
    for i, text in enumerate(prompts):
        if text not in seen:
            seen[text] = may_match(text) and _same_condition(*conditioner(text, negative_prompt))
        if seen[text]:
            same.append(i)
    if not same:
        return []
    if not negative_prompt:
        target = "the empty caption, the null condition"
    elif conditioner.kind == "class":
        target = f"the --negative-prompt's class {_short(negative_prompt)}"
    else:
        target = f"the --negative-prompt {_short(negative_prompt)}"
    verb = ("is" if len(same) == 1 else "are") if conditioner.kind == "class" else ("encodes as" if len(same) == 1 else "encode as")
    scale = _scale_named(asked_guidance, guidance)
    its = "its video" if len(same) == 1 else "their videos"
    advice = "write a prompt, or give a --negative-prompt to guide away from" if not negative_prompt else "give them different prompts"
    return [f"{_names(same, prompts)} {verb} {target} that guidance contrasts with, so {scale} cannot change {its} "
            f"(uncond + scale * (cond - uncond) is cond: the conditional branch alone, as at --guidance 1, at twice "
            f"the compute); {advice}"]
