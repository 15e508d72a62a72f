"""Named RNG streams (seed table 3), derived from (seed, stream name, mesh coordinates).

| stream            | differs across     | same across          |
| ----------------- | ------------------ | -------------------- |
| ``timestep``      | DP                 | CP, PP, TP           |
| ``noise``         | DP, CP             | PP, TP               |
| ``cond_dropout``  | DP                 | CP, PP, TP           |
| ``init``          | PP, TP             | DP, CP               |
| ``init-replicated`` (conditioning embedders) | nothing | everything |

A stream's seed hashes the seed, the name and the coordinates of only the dimensions it differs
across, so a layout's run is reproducible and e.g. adding TP ranks does not change the noise.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

import torch

from vfm_parallel.dims import MESH_DIMS

_DP = ("dp_replicate", "dp_shard")
#: Mesh dimensions each stream differs across.
STREAMS: dict[str, tuple[str, ...]] = {
    "timestep": _DP,
    "noise": (*_DP, "cp"),
    "cond_dropout": _DP,  # which samples train on the null condition: ranks sharing a sample agree
    "init": ("pp", "tp"),
    "init-replicated": (),
}


def coordinates(mesh: Any) -> dict[str, int]:
    """This rank's coordinate along each named mesh dimension (0 for dimensions the mesh lacks)."""
    if mesh is None:
        return {}
    coords = mesh.get_coordinate()
    return {name: int(c) for name, c in zip(mesh.mesh_dim_names, coords)}


def stream_seed(seed: int, stream: str, coords: Mapping[str, int]) -> int:
    """The 63-bit seed of ``stream`` at ``coords`` (a dict dim -> coordinate)."""
    if stream not in STREAMS:
        raise KeyError(f"unknown RNG stream {stream!r}; streams: {', '.join(STREAMS)}")
    unknown = sorted(set(coords) - set(MESH_DIMS))
    if unknown:
        raise KeyError(f"unknown mesh dimension(s) {', '.join(unknown)}; dimensions: {', '.join(MESH_DIMS)}")
    key = f"{seed}|{stream}|" + ",".join(f"{d}={coords.get(d, 0)}" for d in STREAMS[stream])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1


def generator(stream: str, mesh: Any = None, seed: int = 0, device: str | torch.device = "cpu",
              coords: Mapping[str, int] | None = None) -> torch.Generator:
    """A fresh ``torch.Generator`` for ``stream`` on this rank (coordinates from ``mesh`` unless
    ``coords`` is given)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(stream_seed(seed, stream, coordinates(mesh) if coords is None else coords))
    return gen
