"""Checks of the loader's settings when it is made: a value of the wrong type or range is named with
what is accepted, instead of a ``ZeroDivisionError``, energon's bare ``AssertionError`` or a
``KeyError`` at the first batch, or a seed of ``"abc"`` taken as given."""

from __future__ import annotations

from typing import Any, Mapping

from vfm_data.numbers_rule import is_whole_number


class LoaderOptionError(ValueError):
    """A loader setting the loader cannot use: names it, the value and what is accepted."""


#: name -> (smallest value, None allowed, what it is)
WHOLE_NUMBER_OPTIONS: dict[str, tuple[int, bool, str]] = {
    "patch_size": (1, False, "the model's spatial patch size"),
    "temporal_patch": (1, False, "the model's temporal patch size"),
    "batch_size": (1, False, "samples per step, or packs when packing"),
    "num_workers": (0, False, "data worker processes; 0 reads in this process"),
    "streams": (1, False, "logical streams that define the sample order"),
    "max_seq_len": (1, True, "tokens per pack; none: no packing"),
    "packing_buffer": (1, True, "samples packed at a time; none: the default"),
    "shuffle_buffer": (0, True, "samples shuffled at a time; none, 0 or 1: no shuffling"),
    "max_samples_per_sequence": (1, True, "samples read in a row from one shard; none: no limit"),
    "latent_channels": (1, True, "the model's latent channels; none: not checked"),
    "seed": (None, False, "the loader's seed"),  # any whole number
    "dp_world": (1, False, "data-parallel ranks"),
    "dp_rank": (0, False, "this process's data-parallel rank"),
}


#: what the loader does with a sample over ``max_seq_len`` tokens -> how the policy is described
OVERLONG_POLICIES: dict[str, str] = {
    "drop": "skip a sample over max_seq_len tokens",
    "crop": "keep its first frames that fit, or the middle rows of one frame",
}
#: how a subset group shares a step (see ``vfm_data.loader.share_mode``)
SHARE_MODES = ("auto", "gather", "turns")


def _choices(names: Any) -> str:
    names = [repr(n) for n in names]
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def overlong_problem(value: Any, caller: str) -> str | None:
    """The one-line refusal of an ``overlong`` setting, or None when it is a policy."""
    if isinstance(value, str) and value in OVERLONG_POLICIES:
        return None
    accepted = " or ".join(f"{name!r} ({what})" for name, what in OVERLONG_POLICIES.items())
    return f"{caller}: overlong={value!r} is not accepted; accepted: {accepted}"


def check_loader_options(values: Mapping[str, Any]) -> None:
    """Refuse the first setting in ``values`` (any of them; the others are not looked at) that is not
    what the loader takes."""
    for name, value in values.items():
        if name in WHOLE_NUMBER_OPTIONS:
            low, optional, what = WHOLE_NUMBER_OPTIONS[name]
            if value is None and optional:
                continue
            if not is_whole_number(value) or (low is not None and value < low):
                bound = "a whole number" + ("" if low is None else f" >= {low}") + (" or None" if optional else "")
                raise LoaderOptionError(f"make_loader: {name}={value!r} is not accepted; accepted: {bound} ({what})")
        elif name in ("split_part", "blender") and (not isinstance(value, str) or not value):
            raise LoaderOptionError(f"make_loader: {name}={value!r} is not accepted; accepted: a name (a non-empty string)")
        elif name == "overlong" and (problem := overlong_problem(value, "make_loader")):
            raise LoaderOptionError(problem)
        elif name == "share" and not (isinstance(value, str) and value in SHARE_MODES):
            raise LoaderOptionError(f"make_loader: share={value!r} is not accepted; accepted: {_choices(SHARE_MODES)} "
                                    "(how a subset group shares a step)")
        elif name == "trust_dataset_code" and not isinstance(value, bool):
            raise LoaderOptionError(f"make_loader: trust_dataset_code={value!r} is not accepted; accepted: True or False")
    rank, world = values.get("dp_rank", 0), values.get("dp_world", 1)
    if is_whole_number(rank) and is_whole_number(world) and rank >= world:
        raise LoaderOptionError(f"make_loader: dp_rank={rank} is not accepted with dp_world={world}; accepted: "
                                f"0 <= dp_rank < dp_world")
