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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import yaml


def write_blend(
    file: str | os.PathLike,
    datasets: Sequence[tuple[str | os.PathLike, float]],
    *,
    split_part: str = "train",
) -> Path:
    """Write a blend of ``(dataset folder, weight)`` pairs as an energon metadataset YAML.

    Datasets inside the blend file's folder are written as relative paths (energon resolves them
    against the file's folder), so a folder of shards plus its blend file can be moved or copied.
    """
    if not datasets:
        raise ValueError("a blend needs at least one (path, weight) pair")
    for path, weight in datasets:
        if weight <= 0:
            raise ValueError(f"blend weight of {path} must be > 0, got {weight}")
        if not (Path(path) / ".nv-meta").is_dir():
            raise FileNotFoundError(f"{path} is not a prepared dataset (no .nv-meta/); run prepare_dataset first")
    file = Path(file)
    doc = {
        "__module__": "megatron.energon",
        "__class__": "MetadatasetV2",
        "splits": {
            split_part: {"blend": [{"weight": float(w), "path": _relative_if_inside(p, file)} for p, w in datasets]}
        },
    }
    file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return file


def _relative_if_inside(dataset: str | os.PathLike, blend_file: Path) -> str:
    dataset, base = Path(dataset).resolve(), blend_file.resolve().parent
    return str(dataset.relative_to(base)) if dataset.is_relative_to(base) else str(dataset)
