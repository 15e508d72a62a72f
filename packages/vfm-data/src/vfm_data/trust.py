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
import warnings
from pathlib import Path
from typing import Any, Iterator

from vfm_data.blend_file import entry_path

#: The one object a vfm ``dataset.yaml`` names (``vfm_data.writer.DATASET_YAML``).
DATASET_CLASSES = {("megatron.energon", "CrudeWebdataset")}
#: The one object a vfm blend file names (``vfm_data.blend_file.write_blend``).
BLEND_CLASSES = {("megatron.energon", "MetadatasetV2")}
#: ``.nv-meta`` YAML files vfm (through energon's preparation) writes, and nothing else.
META_YAMLS = ("dataset.yaml", "split.yaml", ".info.yaml")
_IMPORT_KEYS = ("__module__", "__class__", "__function__")
_BLEND_ENTRY_KEYS = {"path", "weight", "subflavors"}
#: ``file.py:function`` (or ``module:function``) strings that energon imports and calls.
_CODE_REF = re.compile(r"^[\w./\\-]+(\.py)?:\w+$")
_OPT_IN = ("to let energon run it anyway, and only for data you trust: vfm train --trust-dataset-code "
           "(config data.trust_dataset_code = true; make_loader(..., trust_dataset_code=True))")


class UntrustedDatasetError(ValueError):
    """Dataset metadata that vfm did not write: names the file, the key and what is accepted."""

    def __init__(self, file: Path | str, key: str, reason: str) -> None:
        super().__init__(f"{file}: {key}: {reason}. vfm does not hand it to energon; {_OPT_IN}")
        self.file, self.key, self.reason = str(file), key, reason

    def __reduce__(self):  # rebuilt from its fields, so it crosses processes (loader workers)
        return type(self), (self.file, self.key, self.reason)


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


def check_dataset(path: Any, *, trust_dataset_code: bool = False) -> None:
    """Refuse a dataset folder, blend YAML or metadataset dict whose metadata vfm did not write.

    Blends are followed into every dataset (and nested blend) they name. A path that does not exist
    is a :class:`DatasetNotFoundError` (a ``FileNotFoundError``), trusted or not.
    """
    if not isinstance(path, dict) and not Path(os.fspath(path)).exists():
        raise DatasetNotFoundError(Path(os.fspath(path)))
    if trust_dataset_code:
        warnings.warn(f"trusting the dataset code of {path if not isinstance(path, dict) else 'an in-memory blend'}: "
                      "energon may import and run what its YAML names", UserWarning, stacklevel=2)
        return
    _check_path(path, seen=set())


def _check_path(path: Any, seen: set[Path], named_by: str = "") -> None:
    if isinstance(path, dict):
        _check_blend(path, "<in-memory blend>", base=Path("/"), seen=seen)
        return
    path = Path(os.fspath(path))
    if not path.exists():
        raise DatasetNotFoundError(path, named_by)
    resolved = path.resolve()
    if resolved in seen:
        raise UntrustedDatasetError(path, "path", "the blend names itself (a cycle)")
    seen.add(resolved)
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        _check_blend(_load(path), path, base=path.parent, seen=seen)
    elif (path / ".nv-meta").is_dir():
        _check_dataset_folder(path)
    else:
        raise UntrustedDatasetError(path, "path", "not a prepared dataset folder (with .nv-meta/) nor a blend .yaml file")


def _load(file: Path) -> Any:
    from vfm_data.blend_file import read_yaml

    try:
        return read_yaml(file)
    except Exception as exc:  # noqa: BLE001 - the parser's own error types vary
        raise UntrustedDatasetError(file, "<file>", f"not readable YAML ({type(exc).__name__}: {exc})") from None


# --- dataset folders -------------------------------------------------------------------------------


def _check_dataset_folder(folder: Path) -> None:
    meta = folder / ".nv-meta"
    dataset_yaml = meta / "dataset.yaml"
    if not dataset_yaml.is_file():
        raise UntrustedDatasetError(meta, "dataset.yaml", "missing; vfm's prepare_dataset writes it")
    for file in sorted(meta.iterdir()):
        if file.suffix in (".yaml", ".yml") and file.name not in META_YAMLS:
            raise UntrustedDatasetError(file, "<file>", f"vfm writes no such file; accepted YAML here: {', '.join(META_YAMLS)}")
    _check_dataset_yaml(dataset_yaml, _load(dataset_yaml))
    if (meta / "split.yaml").is_file():
        split = _load(meta / "split.yaml")
        _refuse_code(meta / "split.yaml", split)
        _only_keys(meta / "split.yaml", "", split, {"split_parts", "exclude"})
        _plain_strings(meta / "split.yaml", "split_parts", split.get("split_parts"), depth=2)
        _plain_strings(meta / "split.yaml", "exclude", split.get("exclude", []), depth=1)
    if (meta / ".info.yaml").is_file():
        info = _load(meta / ".info.yaml")
        _refuse_code(meta / ".info.yaml", info)
        _only_keys(meta / ".info.yaml", "", info, {"energon_version", "shard_counts"})


def _check_dataset_yaml(file: Path, doc: Any) -> None:
    _refuse_code(file, doc, allowed_root=DATASET_CLASSES)
    _only_keys(file, "", doc, set(_IMPORT_KEYS) - {"__function__"})
    named = (doc.get("__module__"), doc.get("__class__"))
    if named not in DATASET_CLASSES:
        raise UntrustedDatasetError(file, "__class__", f"names {_dotted(*named)}; accepted: {_accepted(DATASET_CLASSES)}")


# --- blend files -----------------------------------------------------------------------------------


def _check_blend(doc: Any, file: Path | str, *, base: Path, seen: set[Path]) -> None:
    _refuse_code(file, doc, allowed_root=BLEND_CLASSES)
    _only_keys(file, "", doc, {"__module__", "__class__", "splits"})
    named = (doc.get("__module__"), doc.get("__class__"))
    if named not in BLEND_CLASSES:
        raise UntrustedDatasetError(file, "__class__", f"names {_dotted(*named)}; accepted: {_accepted(BLEND_CLASSES)}")
    splits = doc.get("splits")
    if not isinstance(splits, dict) or not splits:
        raise UntrustedDatasetError(file, "splits", "must map split names to {blend: [...]}")
    for split, body in splits.items():
        _only_keys(file, f"splits.{split}", body, {"blend"})
        entries = body.get("blend")
        if not isinstance(entries, list) or not entries:
            raise UntrustedDatasetError(file, f"splits.{split}.blend", "must be a non-empty list of {path, weight}")
        for i, entry in enumerate(entries):
            key = f"splits.{split}.blend[{i}]"
            _only_keys(file, key, entry, _BLEND_ENTRY_KEYS)
            _check_entry(file, key, entry)
            _check_path(entry_path(entry, base), seen, f"{file} {key}.path")


def _check_entry(file: Path | str, key: str, entry: dict) -> None:
    if not isinstance(entry.get("path"), str) or not entry["path"]:
        raise UntrustedDatasetError(file, f"{key}.path", "must be a dataset folder or blend file path (a string)")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
        raise UntrustedDatasetError(file, f"{key}.weight", f"must be a positive finite number, got {weight!r}")
    subflavors = entry.get("subflavors", {})
    if not isinstance(subflavors, dict):
        raise UntrustedDatasetError(file, f"{key}.subflavors", "must be a mapping of names to plain values")
    for name, value in subflavors.items():
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise UntrustedDatasetError(file, f"{key}.subflavors.{name}", "must be a plain value (string, number, bool)")


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
            named = (value.get("__module__"), value.get("__class__"))
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


def _dotted(module: Any, name: Any) -> str:
    return f"{module}.{name}" if module and name else repr(name or module)


def _accepted(classes: set[tuple[str, str]]) -> str:
    return ", ".join(sorted(_dotted(*c) for c in classes))
