"""Dataset metadata is data: check it against what vfm writes before megatron-energon reads it.

Energon builds any Python object its YAML names (``__module__`` / ``__class__`` / ``__function__``)
and imports ``sample_loader: file.py:fn`` strings, so a shard folder or a blend file from someone
else could run code while a loader is built. vfm writes a fixed, small shape of metadata
(``writer.DATASET_YAML``, energon's ``split.yaml`` and ``.info.json``, ``blend_file.write_blend``);
:func:`check_dataset` accepts exactly that and refuses anything else, naming the file and the key.
``trust_dataset_code=True`` skips the check with a warning (``vfm train --trust-dataset-code``).

The files are parsed with energon's own YAML reader (``blend_file.read_yaml``, the one vfm's blend
reading uses too), so the check sees what energon will see.
"""

from __future__ import annotations

import math
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Any, Iterator

from vfm_data.blend_file import entry_path
from vfm_data.errors import DataWarning
from vfm_data.energon_tools import ACCEPTED as TOOLS_CONFIGS
from vfm_data.energon_tools import TOOLS_YAML
from vfm_data.numbers_rule import is_blend_weight

#: The one object a vfm ``dataset.yaml`` names (``vfm_data.writer.DATASET_YAML``).
DATASET_CLASSES = {("megatron.energon", "CrudeWebdataset")}
#: The one object a vfm blend file names (``vfm_data.blend_file.write_blend``).
BLEND_CLASSES = {("megatron.energon", "MetadatasetV2")}
#: ``.nv-meta`` YAML files vfm (through energon's preparation) writes, and nothing else.
META_YAMLS = ("dataset.yaml", "split.yaml", ".info.yaml", TOOLS_YAML)
_IMPORT_KEYS = ("__module__", "__class__", "__function__")
_BLEND_ENTRY_KEYS = {"path", "weight", "subflavors"}
#: ``file.py:function`` (or ``module:function``) strings that energon imports and calls.
_CODE_REF = re.compile(r"^[\w./\\-]+(\.py)?:\w+$")
_OPT_IN = ("to let energon run it anyway, and only for data you trust: vfm train --trust-dataset-code "
           "(config data.trust_dataset_code = true; make_loader(..., trust_dataset_code=True))")


class UntrustedDatasetError(ValueError):
    """Dataset metadata that vfm did not write: names the file, the key and what is accepted."""

    def __init__(self, file: Path | str, key: str, reason: str, hint: str | None = None) -> None:
        # ``hint``: what is accepted when the opt-in is not the answer (paths, sizes); default: the opt-in
        self.file, self.key, self.reason, self.hint = str(file), key, reason, hint
        super().__init__(self._message())

    def _message(self) -> str:
        tail = _OPT_IN if self.hint is None else self.hint
        return f"{self.file}: {self.key}: {self.reason}. vfm does not hand it to energon" + (f"; {tail}" if tail else "")

    def __reduce__(self):  # rebuilt from its fields, so it crosses processes (loader workers)
        return type(self), (self.file, self.key, self.reason, self.hint)


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder or blend file that does not exist: names the path (and the blend naming it)
    and what is accepted; missing is not untrusted, so no advice to trust its code."""

    def __init__(self, path: Path, named_by: str = "") -> None:
        by = f" (named by {named_by})" if named_by else ""
        super().__init__(f"vfm_data: {path} does not exist{by}; accepted: a prepared dataset folder (with .nv-meta/, "
                         f"vfm shard or vfm_data.prepare_dataset writes it) or a blend .yaml file")
        self.path, self.named_by = str(path), named_by

    def __reduce__(self):  # OSError's own pickling would call __init__ with (errno, message)
        return type(self), (self.path, self.named_by)


class UnpreparedDatasetError(UntrustedDatasetError):
    """A folder of tars without energon's ``.nv-meta/`` (or not a dataset at all): names what it holds
    and what to run on it. Not a matter of trust, so no advice to trust its code."""

    def __init__(self, path: Path | str, detail: str) -> None:
        super().__init__(path, "path", detail, hint="")  # the parent's fields, its own message

    def _message(self) -> str:
        return f"vfm_data: {self.reason}"

    def __reduce__(self):
        return type(self), (self.file, self.reason)


def check_dataset(path: Any, *, trust_dataset_code: bool = False) -> None:
    """Refuse a dataset folder, blend YAML or metadataset dict whose metadata vfm did not write.

    Blends are followed into every dataset (and nested blend) they name. A path that does not exist
    is a :class:`DatasetNotFoundError` (a ``FileNotFoundError``), trusted or not.
    """
    if not isinstance(path, dict) and not Path(os.fspath(path)).exists():
        raise DatasetNotFoundError(Path(os.fspath(path)))
    if trust_dataset_code:
        warnings.warn(f"trusting the dataset code of {path if not isinstance(path, dict) else 'an in-memory blend'}: "
                      "energon may import and run what its YAML names", DataWarning, stacklevel=2)
        return
    _check_path(path, seen=frozenset(), checked=set())


def _check_path(path: Any, seen: frozenset[Path], checked: set[Path], named_by: str = "") -> None:
    """``seen``: the blends being read above this one; ``checked``: what was accepted already (a
    folder named by several blends is read once, so nesting cannot multiply the work)."""
    if isinstance(path, dict):
        _check_blend(path, "<in-memory blend>", base=Path("/"), seen=seen, checked=checked)
        return
    path = Path(os.fspath(path))
    if not path.exists():
        raise DatasetNotFoundError(path, named_by)
    resolved = path.resolve()
    if resolved in checked:
        return
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        # ``seen`` holds the blends being read above this one: a blend among them is a cycle; the same
        # dataset or blend named twice (two blends nested, both naming it) is not
        if resolved in seen:
            raise UntrustedDatasetError(path, "path", f"the blend names itself (a cycle, named by {named_by})",
                                        hint="accepted: blends that name dataset folders or other blends, none naming back")
        _check_blend(_load(path), path, base=path.parent, seen=seen | {resolved}, checked=checked)
    elif (path / ".nv-meta").is_dir():
        _check_dataset_folder(path)
    else:
        from vfm_data.foreign import shardless_hint, unprepared_hint

        if path.is_dir():
            empty = (f"{path} holds no .tar shards: no samples to read; accepted: a folder of shards vfm shard or "
                     "vfm_data.prepare_dataset indexed, or a blend file (leave a dataset without samples out of a blend)")
        else:
            empty = (f"{path} is not a prepared dataset folder (with .nv-meta/) nor a blend .yaml file; accepted: a "
                     "folder vfm shard or vfm_data.prepare_dataset wrote, or a blend file")
        detail = unprepared_hint(path) or shardless_hint(path) or empty
        raise UnpreparedDatasetError(path, detail + (f" (named by {named_by})" if named_by else ""))
    checked.add(resolved)


def _load(file: Path) -> Any:
    from vfm_data.blend_file import read_yaml

    try:
        return read_yaml(file)
    except Exception as exc:  # noqa: BLE001 - the parser's own error types vary
        raise UntrustedDatasetError(file, *_unreadable(file, exc)) from None


def _unreadable(file: Path, exc: Exception) -> tuple[str, str, str]:
    """(key, reason, hint) for a file energon's YAML reader fails on. Its reader fails on an empty
    value (``blend:`` with nothing after it, an empty file) with an AttributeError: name the key.
    Trusting the dataset code would not help energon read it, so no such advice."""
    import yaml

    accepted = "accepted: the YAML vfm writes (write_blend, prepare_dataset)"
    try:
        doc = yaml.safe_load(file.read_bytes())
    except Exception:  # noqa: BLE001 - not YAML at all: energon's own words
        return "<file>", f"not readable YAML ({type(exc).__name__}: {exc})", accepted
    if doc is None:
        return "<file>", "empty", accepted
    empty = [key for key, value in _walk(doc) if value is None and key]
    if empty:
        return empty[0], "has no value (energon's YAML reader cannot read an empty value)", f"give it one; {accepted}"
    return "<file>", f"not readable by energon's YAML reader ({type(exc).__name__}: {exc})", accepted


# --- dataset folders -------------------------------------------------------------------------------


def _check_dataset_folder(folder: Path) -> None:
    meta = folder / ".nv-meta"
    files = sorted(meta.iterdir())
    for file in files:  # before any is_file() below takes a named pipe for a missing file
        _check_regular(file, file)
    dataset_yaml = meta / "dataset.yaml"
    if not dataset_yaml.is_file():
        from vfm_data.foreign import prepare_commands

        raise UntrustedDatasetError(meta, "dataset.yaml", "missing (a preparation that did not finish?)",
                                    hint=f"prepare the folder to the end: {prepare_commands(folder)}")
    for file in files:
        if file.suffix in (".yaml", ".yml") and file.name not in META_YAMLS:
            raise UntrustedDatasetError(file, "<file>", f"vfm writes no such file; accepted YAML here: {', '.join(META_YAMLS)}")
    _check_dataset_yaml(dataset_yaml, _load(dataset_yaml))
    _check_tools_yaml(meta / TOOLS_YAML)
    # energon reads .info.json before .info.yaml, and split.json only when split.yaml is missing
    info_file = meta / ".info.json" if (meta / ".info.json").is_file() else meta / ".info.yaml"
    counts: dict[str, int] = {}
    if info_file.is_file():
        info = _load_json(info_file) if info_file.suffix == ".json" else _load(info_file)
        _refuse_code(info_file, info)
        _only_keys(info_file, "", info, {"energon_version", "shard_counts"})
        counts = _check_shard_counts(folder, info_file, info.get("shard_counts", {}))
    split_file = meta / "split.yaml" if (meta / "split.yaml").is_file() else meta / "split.json"
    if split_file.is_file():
        split = _load_json(split_file) if split_file.suffix == ".json" else _load(split_file)
        _refuse_code(split_file, split)
        _only_keys(split_file, "", split, {"split_parts", "exclude"})
        _plain_strings(split_file, "split_parts", split.get("split_parts"), depth=2)
        _plain_strings(split_file, "exclude", split.get("exclude", []), depth=1)
        excluded = set(_expand(split_file, "exclude", split.get("exclude", []), MAX_EXCLUDES))
        for part, names in split["split_parts"].items():
            key = f"split_parts.{part}"
            for name in _expand(split_file, key, names, len(counts) + len(excluded)):
                if name not in excluded and name not in counts:  # the listed ones were checked with the counts
                    _check_shard_name(folder, split_file, key, name)
                    raise UntrustedDatasetError(split_file, key, f"names shard {name!r}, which "
                                                f"{info_file.name} does not list", hint=_IN_FOLDER)


#: Most names a split file's ``exclude`` may expand to (shard names and ``shard/key`` sample names).
MAX_EXCLUDES = 1_000_000
_TAR_BLOCK = 512  # every tar member, so every sample, takes at least one header block
_IN_FOLDER = ("accepted: shard files named relative to the dataset folder and inside it, as vfm shard writes them "
              "(to train on shards in another folder, name that folder in a blend file; copy a folder of linked "
              "shards, e.g. a Hugging Face cache snapshot, with cp -rL)")


def _load_json(file: Path) -> Any:
    from vfm_plugins import json_data

    try:
        return json_data.loads(file.read_bytes())
    except (OSError, ValueError) as exc:
        raise UntrustedDatasetError(file, "<file>", f"not readable JSON ({type(exc).__name__}: {exc})") from None


def _check_shard_name(folder: Path, file: Path, key: str, name: str) -> None:
    """A shard name energon joins to the dataset folder: it (and its ``.idx``) must stay inside it."""
    inside = folder.resolve()
    if not isinstance(name, str) or not name or "\0" in name:
        raise UntrustedDatasetError(file, key, f"shard name {name!r} is not a file name", hint=_IN_FOLDER)
    if os.path.isabs(name) or ".." in Path(name).parts:
        raise UntrustedDatasetError(file, key, f"shard name {name!r} points outside the dataset folder", hint=_IN_FOLDER)
    for candidate in (folder / name, folder / f"{name}.idx"):
        if not candidate.resolve().is_relative_to(inside):
            raise UntrustedDatasetError(file, key, f"shard {candidate.name} is a link to {candidate.resolve()}, "
                                        f"outside the dataset folder {inside}", hint=_IN_FOLDER)
    _check_regular(folder / f"{name}.idx", file, key)  # the shard itself: tar_guard.tar_head_problem


def _check_regular(path: Path, file: Path, key: str = "<file>") -> None:
    """``path``, where it exists, must be a regular file or a folder (links followed): energon opens a named
    pipe there and waits for a writer forever, and ``is_file()`` takes one for a missing file."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # missing (or a broken link): named where it is needed
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UntrustedDatasetError(file, key, f"{path} is not a regular file (a named pipe, a device or a socket); "
                                    "energon would wait on it forever", hint="accepted: the regular files energon prepare writes")


def _check_shard_counts(folder: Path, file: Path, counts: Any) -> dict[str, int]:
    if not isinstance(counts, dict):
        raise UntrustedDatasetError(file, "shard_counts", "must map shard names to sample counts")
    for name, count in counts.items():
        key = f"shard_counts.{name}"
        _check_shard_name(folder, file, key, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise UntrustedDatasetError(file, key, f"must be a whole number of samples >= 0, got {count!r}", hint="")
        shard = folder / name
        if not shard.is_file():
            raise UntrustedDatasetError(file, key, f"lists shard {name}, which is not a file in {folder}",
                                        hint="accepted: the shards the folder holds (re-copy the folder, or prepare it again)")
        size = shard.stat().st_size
        if count > size // _TAR_BLOCK:  # energon sizes its sample tables by these counts
            raise UntrustedDatasetError(file, key, f"says {count} samples, more than its {size} bytes can hold "
                                        f"(at most {size // _TAR_BLOCK}: every sample takes a {_TAR_BLOCK}-byte tar "
                                        f"header at least)",
                                        hint=f"the shard is smaller than when its folder was prepared (a copy cut "
                                             f"short, or the file replaced): copy {name} again, or, if it was "
                                             f"rewritten on purpose, prepare the folder again")
    return counts


def _expand(file: Path, key: str, patterns: list[str], limit: int) -> Iterator[str]:
    """``patterns`` brace-expanded as energon expands them, refusing more than ``limit`` names in
    all before any is made (braceexpand materialises every range: ``{0..999999999}`` is a billion
    strings)."""
    import braceexpand

    total = 0
    for pattern in patterns:
        try:
            total += _brace_count(pattern)
        except ValueError as exc:
            raise UntrustedDatasetError(file, key, f"{pattern!r} is not a brace pattern energon reads ({exc})", hint="") from None
        if total > limit:
            raise UntrustedDatasetError(file, key, f"expands to more than {limit} names ({pattern!r}); "
                                        "accepted: the shards the dataset lists, each once", hint="")
    for pattern in patterns:
        yield from braceexpand.braceexpand(pattern)


def _brace_count(pattern: str) -> int:
    """How many names ``braceexpand(pattern)`` makes, computed without making them (its grammar:
    literals, ``{a,b}`` sequences, ``{1..9..2}`` / ``{a..z}`` ranges, nesting, backslash escapes)."""
    from braceexpand import alphabet, char_range_re, int_range_re

    def pattern_count(text: str) -> int:
        count, pos, depth, opened = 1, 0, 0, 0
        while pos < len(text):
            if text[pos] == "\\":
                pos += 2
                continue
            if text[pos] == "{":
                opened = pos if depth == 0 else opened
                depth += 1
            elif text[pos] == "}":
                depth -= 1
                if depth < 0:
                    raise ValueError("unbalanced braces")
                if depth == 0:
                    count *= expression_count(text[opened + 1:pos])
            pos += 1
        if depth != 0:
            raise ValueError("unbalanced braces")
        return count

    def expression_count(expr: str) -> int:
        if match := int_range_re.match(expr):
            a, b, step = int(match[1]), int(match[2]), (int(match[3]) if match[3] else 1) or 1
            return abs(b - a) // step + 1
        if match := char_range_re.match(expr):
            a, b, step = alphabet.index(match[1]), alphabet.index(match[2]), (int(match[3]) if match[3] else 1) or 1
            return abs(b - a) // step + 1
        items, pos, depth, start = [], 0, 0, 0
        while pos < len(expr):
            if expr[pos] == "\\":
                pos += 2
                continue
            depth += {"{": 1, "}": -1}.get(expr[pos], 0)
            if expr[pos] == "," and depth == 0:
                items.append(expr[start:pos])
                start = pos + 1
            pos += 1
        if depth != 0 or not items:  # not a sequence: braceexpand keeps the braces, expanding inside
            return pattern_count(expr)
        return sum(pattern_count(item) for item in [*items, expr[start:]])

    return pattern_count(pattern)


def _check_dataset_yaml(file: Path, doc: Any) -> None:
    _refuse_energon_sample_type(file, doc)
    _refuse_code(file, doc, allowed_root=DATASET_CLASSES)
    _only_keys(file, "", doc, set(_IMPORT_KEYS) - {"__function__"})
    named = _named(doc)
    if named not in DATASET_CLASSES:
        raise UntrustedDatasetError(file, "__class__", f"names {_dotted(*named)}; accepted: {_accepted(DATASET_CLASSES)}")


def _check_tools_yaml(file: Path) -> None:
    """vfm never reads energon's tools config, but a dataset is what vfm wrote, all of it: only its
    own content is accepted (a changed one may hold energon's sample_loader code)."""
    if file.is_file() and _load(file) not in TOOLS_CONFIGS:
        raise UntrustedDatasetError(file, "<file>", "not the one vfm writes (a CaptioningSample field_map for energon's "
                                    "info / lint / preview)", hint="prepare the folder again to rewrite it, or remove it")


def _refuse_energon_sample_type(file: Path, doc: Any) -> None:
    """A dataset.yaml of energon's own kinds (a ``sample_type`` such as CaptioningSample with a
    ``field_map``, or a class like CaptioningWebdataset), as ``energon prepare`` writes it: no code
    of anyone's, but vfm could not use it either (its task encoder decodes energon's crude samples),
    so the answer is the dataset.yaml vfm reads, not trusting the folder."""
    if not isinstance(doc, dict) or not set(doc) <= {"sample_type", "field_map", "__module__", "__class__"} \
            or not {"sample_type", "field_map"} & set(doc):
        return  # not energon prepare's shape (a sample_loader, a part_filter, a bare class): _refuse_code names it
    sample_type = doc.get("sample_type")
    named = _named(sample_type) if isinstance(sample_type, dict) else _named(doc)
    import megatron.energon

    # one of energon's exported classes by plain name (looked up, nothing imported)
    energon = named[0] == "megatron.energon" and isinstance(named[1], str) and named[1].isidentifier() \
        and isinstance(getattr(megatron.energon, named[1], None), type)
    if named in DATASET_CLASSES or not energon:
        return  # vfm's own, or someone's code: _refuse_code names it
    key = "sample_type" if isinstance(sample_type, dict) else "__class__"
    raise UntrustedDatasetError(file, key, f"names energon's {_dotted(*named)}" + (" with a field_map" if "field_map" in doc else ""),
                                hint="vfm reads a dataset as megatron.energon.CrudeWebdataset (its task encoder decodes the "
                                "members itself), so it could not use that: accepted: a dataset.yaml of just __module__: "
                                "megatron.energon and __class__: CrudeWebdataset (energon prepare --sample-type "
                                "CrudeWebdataset, or vfm_data.prepare_dataset, writes it)")


# --- blend files -----------------------------------------------------------------------------------


def _check_blend(doc: Any, file: Path | str, *, base: Path, seen: frozenset[Path], checked: set[Path]) -> None:
    _refuse_code(file, doc, allowed_root=BLEND_CLASSES)
    _only_keys(file, "", doc, {"__module__", "__class__", "splits"})
    named = _named(doc)
    if named not in BLEND_CLASSES:
        raise UntrustedDatasetError(file, "__class__", f"names {_dotted(*named)}; accepted: {_accepted(BLEND_CLASSES)}")
    splits = doc.get("splits")
    if not isinstance(splits, dict) or not splits:
        raise UntrustedDatasetError(file, "splits", "must map split names to {blend: [...]}")
    for split, body in splits.items():
        _only_keys(file, f"splits.{split}", body, {"blend"})
        entries = body.get("blend")
        if not isinstance(entries, list) or not entries:
            raise UntrustedDatasetError(file, f"splits.{split}.blend", "must be a non-empty list of {path, weight}",
                                        hint=_ENTRY_SHAPE)
        for i, entry in enumerate(entries):
            key = f"splits.{split}.blend[{i}]"
            if not isinstance(entry, dict):
                raise UntrustedDatasetError(file, key, f"must be a mapping with a path, got {type(entry).__name__}", hint=_ENTRY_SHAPE)
            _only_keys(file, key, entry, _BLEND_ENTRY_KEYS)
            _check_entry(file, key, entry)
            _check_path(entry_path(entry, base), seen, checked, f"{file} {key}.path")
        _check_weight_shares(file, f"splits.{split}.blend", [entry.get("weight", 1.0) for entry in entries])


def _check_weight_shares(file: Path | str, key: str, weights: list[float]) -> None:
    """Energon divides each weight by their sum and draws by the shares as float32: weights each finite whose
    sum is not (two of 1e308) ended in a bare ``AssertionError: All blending weights must be > 0``, and a share
    below float32's smallest (1e-320 beside 1) was never drawn, without a word."""
    import numpy as np

    total = sum(weights)
    small = next((i for i, w in enumerate(weights) if not np.float32(w / total) > 0), None) if math.isfinite(total) else None
    if math.isfinite(total) and small is None:
        return
    where, what = (key, f"weights sum to {total}") if small is None else (
        f"{key}[{small}].weight", f"weight {weights[small]} is a share of 0 of the weights' sum ({total}) as the loader draws (float32)")
    raise UntrustedDatasetError(file, where, f"{what}; the loader draws each dataset by its weight's share of the sum",
                                hint="accepted: positive weights whose sum is a finite number and each a share of it above 0 "
                                "(weights are relative: 0.7 and 0.3, or 7 and 3)")


#: What a blend entry holds, for the errors about one (a missing path is a mistake, not a matter of trust).
_ENTRY_SHAPE = ("accepted: every entry names a dataset folder or blend file, e.g. {path: ../videos, weight: 0.7} "
                "(path relative to the blend file's folder, or absolute; weight optional, default 1.0); "
                "write_blend writes such entries")


def _check_entry(file: Path | str, key: str, entry: dict) -> None:
    if "path" not in entry:
        has = ", ".join(map(str, entry)) or "nothing"
        raise UntrustedDatasetError(file, key, f"has no path (it has {has})", hint=_ENTRY_SHAPE)
    if not isinstance(entry["path"], str) or not entry["path"]:
        raise UntrustedDatasetError(file, f"{key}.path", f"must be a dataset folder or blend file path (a non-empty "
                                    f"string), got {'an empty string' if entry['path'] == '' else type(entry['path']).__name__}", hint=_ENTRY_SHAPE)
    weight = entry.get("weight", 1.0)
    if not is_blend_weight(weight):
        raise UntrustedDatasetError(file, f"{key}.weight", f"must be a positive finite number, got {weight!r}",
                                    hint="weights are relative (they need not sum to 1); to leave a dataset out, "
                                    "remove its entry")
    subflavors = entry.get("subflavors", {})
    if not isinstance(subflavors, dict):
        raise UntrustedDatasetError(file, f"{key}.subflavors", "must be a mapping of names to plain values", hint="")
    for name, value in subflavors.items():
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise UntrustedDatasetError(file, f"{key}.subflavors.{name}", "must be a plain value (string, number, bool)",
                                        hint="")


# --- shared rules ----------------------------------------------------------------------------------


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    yield key, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{key}[{i}]")


def _refuse_code(file: Path | str, doc: Any, allowed_root: set[tuple[str, str]] = frozenset()) -> None:
    """Refuse every object construction or function import energon would perform, except the one
    class vfm writes at the top of the document."""
    for key, value in _walk(doc):
        if isinstance(value, dict) and any(k in value for k in _IMPORT_KEYS):
            named = _named(value)
            if key == "" and named in allowed_root and "__function__" not in value:
                continue
            what = _dotted(value.get("__module__"), value.get("__class__") or value.get("__function__"))
            where = key or ("__function__" if "__function__" in value else "__class__")
            raise UntrustedDatasetError(file, where, f"names the Python object {what} to build or call; "
                                        f"vfm writes only {_accepted(allowed_root) if allowed_root else 'no objects'} here")
        last = key.rsplit(".", 1)[-1]
        if last in ("sample_loader", "part_filter") or isinstance(value, str) and key and _CODE_REF.match(value) and ".py:" in value:
            raise UntrustedDatasetError(file, key, f"names code for energon to run ({value!r})")


def _only_keys(file: Path | str, key: str, value: Any, allowed: set[str]) -> None:
    if not isinstance(value, dict):
        raise UntrustedDatasetError(file, key or "<document>", f"must be a mapping with keys {sorted(allowed)}, got {type(value).__name__}")
    unknown = [k for k in value if k not in allowed]
    if unknown:
        where = f"{key}.{unknown[0]}" if key else str(unknown[0])
        raise UntrustedDatasetError(file, where, f"unknown key (vfm writes only {', '.join(sorted(allowed))})")


def _plain_strings(file: Path, key: str, value: Any, depth: int) -> None:
    """``depth`` 1: a list of strings; 2: a mapping of names to lists of strings."""
    if depth == 2:
        if not isinstance(value, dict):
            raise UntrustedDatasetError(file, key, "must map split names to lists of shard names")
        for k, v in value.items():
            _plain_strings(file, f"{key}.{k}", v, 1)
    elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UntrustedDatasetError(file, key, "must be a list of shard names")


def _named(doc: Any) -> tuple[Any, Any]:
    """(``__module__``, ``__class__``) of a mapping, anything but a string or None shown as its repr
    (a list there made the set lookup a TypeError)."""
    return tuple(v if v is None or isinstance(v, str) else repr(v) for v in (doc.get("__module__"), doc.get("__class__")))


def _dotted(module: Any, name: Any) -> str:
    return f"{module}.{name}" if module and name else repr(name or module)


def _accepted(classes: set[tuple[str, str]]) -> str:
    return ", ".join(sorted(_dotted(*c) for c in classes))
