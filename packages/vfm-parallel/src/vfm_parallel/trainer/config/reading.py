"""A :class:`TrainConfig` from TOML or nested dicts: types checked per key, ``--set`` overrides applied."""

from __future__ import annotations

import dataclasses
import functools
import tomllib
import typing
from pathlib import Path
from typing import Any, Mapping

from vfm_parallel.trainer.config.sections import ConfigError, TrainConfig
from vfm_plugins.text import did_you_mean


_SCALARS = {int: (int,), float: (int, float), str: (str,), bool: (bool,), list: (list,), dict: (dict,)}


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    # resolved once per config class: vfm plan reads thousands of candidate [parallel] blocks
    return typing.get_type_hints(cls)


def _field_type(cls: type, f: dataclasses.Field) -> Any:
    return _type_hints(cls)[f.name]


#: What TOML read an unquoted value as, for a text key given one (``out_dir = 2024`` is an integer).
_READ_AS = {bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "a table"}


def _quote_hint(key: str, value: Any, given: Mapping[str, str]) -> str:
    """How to give ``value`` as text: TOML reads ``2024``, ``true``, ``1e3`` or ``2024-01-01`` unquoted as a
    number, boolean or date, both in the file and in ``--set`` (whose value is TOML too). ``given``: the
    ``--set`` keys and their values as typed, so the hint quotes what the user wrote."""
    read_as = next((words for kind, words in _READ_AS.items() if isinstance(value, kind)), "a date or time")
    if key in given:
        return f"; the value was read as {read_as}: quote it to keep it text, --set '{key}=\"{given[key]}\"'"
    text = str(value).lower() if isinstance(value, bool) else value.isoformat() if hasattr(value, "isoformat") else value
    return f"; the value was read as {read_as}: quote it to keep it text, {key.rsplit('.', 1)[-1]} = \"{text}\""


def _coerce(key: str, value: Any, kind: Any, given: Mapping[str, str] = {}) -> Any:
    accepted = _SCALARS.get(kind)
    if accepted is None:
        return value
    # bool is an int subclass in Python; TOML keeps them apart and so do we.
    ok = isinstance(value, accepted) and (kind is bool) == isinstance(value, bool)
    if not ok:
        hint = _quote_hint(key, value, given) if kind is str and not isinstance(value, (list, dict)) else ""
        raise ConfigError(key, f"expected {kind.__name__}, got {type(value).__name__} {value!r}{hint}")
    return float(value) if kind is float else value


def _build(cls: type, data: Any, prefix: str, given: Mapping[str, str] = {}) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(prefix, f"expected a table, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        guess = did_you_mean(unknown[0], fields)  # train.step -> steps
        raise ConfigError(where, f"unknown key{guess}; accepted: {', '.join(fields)}")
    values = {}
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        kind = _field_type(cls, fields[name])
        if dataclasses.is_dataclass(kind):
            values[name] = _build(kind, value, key, given)
        else:
            values[name] = _coerce(key, value, kind, given)
    return cls(**values)


def from_dict(data: dict[str, Any], world_size: int | None = None, given: Mapping[str, str] = {}) -> TrainConfig:
    """A validated config from nested dicts (as TOML parses them); ``given``: the dotted keys that ``--set``
    gave and their values as typed, so that a wrong value's hint is a ``--set`` item, not a file line."""
    return _build(TrainConfig, data, "", given).validate(world_size)


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"optim.lr=1e-4"`` -> (["optim", "lr"], 1e-4). The value is read as TOML, else a string."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(item, "an override must look like section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # bare words: --set model.family=dit
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` items to nested dicts (a copy); unknown keys are caught by validation."""
    out = _deepcopy(data)
    for item in overrides:
        path, value = parse_override(item)
        node = out
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(".".join(path), f"'{part}' is a value, not a table")
            node = child
        node[path[-1]] = value
    return out


def _deepcopy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deepcopy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deepcopy(v) for v in data]
    return data


class ConfigFileError(ConfigError):
    """The config file itself cannot be read: its message names the file, not a key (``key`` is
    ``"<file>"``); a :class:`ConfigError`, so callers that catch those report it the same way."""

    def __init__(self, reason: str) -> None:
        super().__init__("<file>", reason)
        self.args = (reason,)

    def __str__(self) -> str:
        return self.reason

    def __reduce__(self):  # its constructor takes the reason alone (ConfigError's passes the key too)
        return type(self), (self.reason,)


_ACCEPTED = "accepted: a TOML training config file (e.g. configs/tiny.toml)"


def load(path: str | Path, overrides: list[str] = (), world_size: int | None = None) -> TrainConfig:
    """Read a TOML config, apply ``--set`` overrides, validate."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"no config file at {path}; {_ACCEPTED}") from None
    except IsADirectoryError:
        raise ConfigFileError(f"{path} is a folder, not a config file; {_ACCEPTED}") from None
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path} is not a text file; {_ACCEPTED}") from None
    except OSError as exc:
        raise ConfigFileError(f"cannot read the config file {path} ({exc.strerror or exc}); {_ACCEPTED}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path} is not valid TOML: {exc}") from None
    overrides = list(overrides)
    given = {key.strip(): raw.strip() for key, _, raw in (item.partition("=") for item in overrides)}
    return from_dict(apply_overrides(data, overrides), world_size, given)
