"""The blend file: an energon metadataset (v2) YAML, so stock energon reads it too.

```yaml
__module__: megatron.energon
__class__: MetadatasetV2
splits:
  train:
    blend:
      - weight: 0.7
        path: ../videos        # relative to the YAML file, or absolute
      - weight: 0.3
        path: ../images
```

How the weights are used is the blender's choice (``make_loader(..., blender="scheduled", ...)``);
the weighted blender uses them as they are.

:func:`write_blend` writes one; :func:`read_yaml` reads it (or any dataset YAML) with energon's own
reader, :func:`entry_path` places an entry's dataset as energon does, and :func:`dataset_folders`
lists the dataset folders a blend trains on. :mod:`vfm_data.trust` checks what a blend may name with
the same three.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml
from vfm_plugins.files import replace_file

from vfm_data.numbers_rule import is_blend_weight


class BlendFileError(ValueError):
    """A blend file vfm cannot read: names the file and what a blend file holds."""


def write_blend(
    file: str | os.PathLike,
    datasets: Sequence[tuple[str | os.PathLike, float]],
    *,
    split_part: str = "train",
    more_splits: Mapping[str, Sequence[tuple[str | os.PathLike, float]]] | None = None,
) -> Path:
    """Write a blend of ``(dataset folder or blend file, weight)`` pairs as an energon metadataset YAML.

    Datasets inside the blend file's folder are written as relative paths (energon resolves them
    against the file's folder), so a folder of shards plus its blend file can be moved or copied.
    ``more_splits``: other split parts, each its own pairs (e.g. ``{"val": [...]}``, read with
    ``split_part="val"``; every dataset named there must have that split part).
    """
    splits = {split_part: datasets, **(more_splits or {})}
    for name, pairs in splits.items():
        if not pairs:
            raise ValueError(f"a blend needs at least one (path, weight) pair per split (split {name!r} has none)")
    for path, weight in (pair for pairs in splits.values() for pair in pairs):
        # the rule the loader applies to a blend file (vfm_data.trust): never write one it refuses
        if not is_blend_weight(weight):
            raise ValueError(f"blend weight of {path} must be a positive finite number, got {weight!r}; weights are "
                             "relative (they need not sum to 1); to leave a dataset out, leave out its pair")
        folder = Path(path)
        if folder.is_file() and folder.suffix in (".yaml", ".yml"):
            continue  # a nested blend (vfm shard's output's blend.yaml): the loader checks it as it reads it
        if not (folder / ".nv-meta").is_dir():
            from vfm_data.foreign import shardless_hint, unprepared_hint

            # the loader's hints (a vfm shard bucket is indexed by vfm shard, not prepare_dataset); an
            # empty folder is not told to run prepare_dataset, which refuses it: that goes round in a circle
            raise FileNotFoundError(unprepared_hint(folder) or shardless_hint(folder) or (
                f"{path} holds no .tar shards (a missing or empty folder: no samples to blend); leave its pair out "
                "of the blend, or write samples into it and prepare_dataset it"))
    file = Path(file)
    doc = {
        "__module__": "megatron.energon",
        "__class__": "MetadatasetV2",
        "splits": {
            name: {"blend": [{"weight": float(w), "path": _relative_if_inside(p, file)} for p, w in pairs]}
            for name, pairs in splits.items()
        },
    }
    replace_file(file, yaml.safe_dump(doc, sort_keys=False))  # a link planted at `file` is replaced, not written through
    return file


def _relative_if_inside(dataset: str | os.PathLike, blend_file: Path) -> str:
    # the folder the file is in, not a link's target's: the written file replaces a link at its name
    dataset, base = Path(dataset).resolve(), blend_file.parent.resolve()
    return str(dataset.relative_to(base)) if dataset.is_relative_to(base) else str(dataset)


def read_yaml(file: str | os.PathLike) -> Any:
    """A blend or dataset YAML file parsed by energon's own reader (what energon will see)."""
    from megatron.energon.eyaml import load_yaml

    return load_yaml(Path(file).read_bytes())


def entry_path(entry: dict, base: Path) -> Path:
    """Where a blend entry's ``path`` points: absolute, or relative to the blend file's folder ``base``."""
    target = Path(entry["path"])
    return target if target.is_absolute() else base / target


def dataset_folders(path: str | os.PathLike, *, split_part: str = "train") -> list[Path]:
    """The prepared dataset folders a blend file trains on (``split_part``'s entries, nested blends
    followed), in the file's order; a dataset folder is itself. Raises :class:`BlendFileError`
    naming the file when it is missing or is not a blend file."""
    return _folders(Path(path), split_part, seen=frozenset())


def _folders(path: Path, split_part: str, seen: frozenset[Path]) -> list[Path]:
    """``seen``: the blends being read above this one (naming one of them again is a cycle; naming a
    dataset or blend twice, e.g. in two nested blends, is not)."""
    if path.suffix not in (".yaml", ".yml"):
        return [path.resolve()]
    if not path.is_file():
        raise BlendFileError(f"no blend file at {path}")
    if path.resolve() in seen:
        raise BlendFileError(f"{path}: the blend names itself (a cycle)")
    try:
        entries = read_yaml(path)["splits"][split_part]["blend"]
        targets = [entry_path(e, path.parent) for e in entries]
    except Exception as exc:  # noqa: BLE001 - a YAML error, a missing key or a wrong type: the parser's types vary
        raise BlendFileError(f"{path} is not a blend file (energon MetadatasetV2 with splits.{split_part}.blend "
                             f"listing {{path, weight}}): {type(exc).__name__}: {exc}") from None
    return [folder for target in targets for folder in _folders(target, split_part, seen | {path.resolve()})]


class SplitNotFoundError(ValueError):
    """A split part the dataset folder or blend does not have: names it, its splits and what is accepted."""


def check_split(path: Any, split_part: str) -> None:
    """Refuse a ``split_part`` that a dataset folder (``.nv-meta/split.yaml``), a blend file or an
    in-memory blend (its dataset folders and nested blends too) does not have, naming the splits it
    has; energon's own failure is a bare ``AssertionError: Invalid split part`` or ``KeyError``.
    Metadata that cannot be read is left to the loader (it names what is wrong with it)."""
    _check_split(path, split_part, named_by="", seen=frozenset())


def _check_split(path: Any, split_part: str, *, named_by: str, seen: frozenset[Path]) -> None:
    blend = isinstance(path, dict) or Path(os.fspath(path)).suffix in (".yaml", ".yml")
    where: Any = "the in-memory blend" if isinstance(path, dict) else Path(os.fspath(path))
    if not isinstance(path, dict) and where.resolve() in seen:
        return  # a cycle: the trust check names it
    try:
        if isinstance(path, dict):
            splits = path["splits"]
        elif blend:
            splits = read_yaml(where)["splits"]
        else:
            splits = read_yaml(where / ".nv-meta" / "split.yaml")["split_parts"]
        names = [str(name) for name in splits]
        entries = splits[split_part]["blend"] if blend and split_part in splits else []
    except Exception:  # noqa: BLE001 - unreadable metadata: the trust check or energon names it
        return
    if split_part not in names:
        by = f" (named by {named_by})" if named_by else ""
        raise SplitNotFoundError(f"vfm_data: {where}{by} has no split {split_part!r}; it has {', '.join(map(repr, names)) or 'none'}; "
                                 f"accepted: split_part= one of those (make_loader(split_part=...)), or a dataset prepared "
                                 f"with that split (prepare_dataset(folder, split_parts=[({split_part!r}, pattern)]))")
    base = Path("/") if isinstance(path, dict) else where.parent
    inner_seen = seen if isinstance(path, dict) else seen | {where.resolve()}
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            _check_split(entry_path(entry, base), split_part, named_by=f"{where} splits.{split_part}.blend[{i}]",
                         seen=inner_seen)
