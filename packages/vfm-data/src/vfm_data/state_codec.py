"""Energon loader states as JSON-ready values, so checkpoints hold them without pickle.

Energon states are nested dicts (``FlexState``), lists, bytes (RNG states) and small dataclasses
from ``megatron.energon``. Dataclasses are tagged with their import path and rebuilt only when that
path is in :data:`ALLOWED_CLASSES` (a checkpoint is data: it never names what gets built); nothing
is unpickled.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
from typing import Any

from megatron.energon.state import FlexState

#: The dataclasses energon's loader states contain (found by encoding real states of every blender,
#: packed and bucketed: tests/data/test_state_codec.py keeps this list and energon in step).
ALLOWED_CLASSES = frozenset({
    "megatron.energon.savable_loader:SavableDataLoaderState",
    "megatron.energon.flavors.webdataset.sample_loader:SliceState",
})


def encode_state(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode()}
    if isinstance(value, FlexState):
        return {"__flex__": {k: encode_state(v) for k, v in value.items()}}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {"__dict__": {k: encode_state(v) for k, v in value.items()}}
        return {"__items__": [[encode_state(k), encode_state(v)] for k, v in value.items()]}  # e.g. bucket keys
    if isinstance(value, tuple):
        return {"__tuple__": [encode_state(v) for v in value]}
    if isinstance(value, list):
        return [encode_state(v) for v in value]
    if dataclasses.is_dataclass(value):
        cls = type(value)
        name = f"{cls.__module__}:{cls.__qualname__}"
        if name not in ALLOWED_CLASSES:  # refused when saving, not only when a resume reads it back
            raise TypeError(f"cannot encode loader state class {name}; accepted: {', '.join(sorted(ALLOWED_CLASSES))}")
        return {
            "__dataclass__": name,
            "fields": {f.name: encode_state(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    raise TypeError(f"cannot encode loader state value of type {type(value).__name__}")


def decode_state(value: Any) -> Any:
    if isinstance(value, list):
        return [decode_state(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__bytes__" in value:
        return base64.b64decode(value["__bytes__"])
    if "__flex__" in value:
        return FlexState({k: decode_state(v) for k, v in value["__flex__"].items()})
    if "__dict__" in value:
        return {k: decode_state(v) for k, v in value["__dict__"].items()}
    if "__items__" in value:
        return {decode_state(k): decode_state(v) for k, v in value["__items__"]}
    if "__tuple__" in value:
        return tuple(decode_state(v) for v in value["__tuple__"])
    if "__dataclass__" in value:
        name = value["__dataclass__"]
        if name not in ALLOWED_CLASSES:
            raise ValueError(f"loader state names class {name!r}; accepted: {', '.join(sorted(ALLOWED_CLASSES))}")
        module, _, qualname = name.partition(":")
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        declared = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value["fields"]) - declared)
        if unknown:  # a state sets the fields its class declares, never other attributes
            raise ValueError(f"loader state of {name} names field {unknown[0]!r}; accepted: {', '.join(sorted(declared))}")
        fields = {k: decode_state(v) for k, v in value["fields"].items()}
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        obj = cls(**{k: v for k, v in fields.items() if k in init})
        for k, v in fields.items():
            if k not in init:
                object.__setattr__(obj, k, v)
        return obj
    raise ValueError(f"unknown loader state entry with keys {sorted(value)}")
