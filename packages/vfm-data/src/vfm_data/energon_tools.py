"""The typed dataset config that lets energon's own `info`, `lint` and `preview` commands read a vfm
dataset folder (`--dataset-config energon_tools.yaml`).

vfm's `dataset.yaml` is a crude dataset (vfm's task encoder decodes the members itself), which those
commands cannot read: `info` needs a `sample_type`, `lint` and `preview` a sample they can build
without a cooker. This second file maps a sample onto energon's `CaptioningSample` (the latent as its
`image`, the caption from the JSON), so energon decodes every latent and caption of the shards.
vfm never reads it; its trust check accepts it only as written here.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from vfm_plugins.files import replace_file

from vfm_data.foreign import member_parts
from vfm_data.format import LATENT_PARTS

TOOLS_YAML = "energon_tools.yaml"


def tools_config(latent_part: str) -> dict:
    """The config for shards whose latents are ``<key>.<latent_part>`` (one of LATENT_PARTS)."""
    return {"sample_type": {"__module__": "megatron.energon", "__class__": "CaptioningSample"},
            "field_map": {"image": latent_part, "caption": "json[caption]"}}


#: Every content of the file that vfm writes (one per latent member format). Only ever added to: the
#: trust check refuses a folder whose file is not listed, so a content an earlier vfm-data wrote
#: (say, for an energon that renamed its sample type) stays accepted beside a new one.
ACCEPTED = [tools_config(part) for part in LATENT_PARTS]


def write_tools_config(meta: Path, first_shard: Path) -> None:
    """Write the file into ``meta`` (a ``.nv-meta`` folder) for the latent format of ``first_shard``;
    nothing when that shard shows no vfm latent (another tool's members: energon's tools could not
    map them either)."""
    parts = member_parts(first_shard)
    latent = next((p for p in LATENT_PARTS if p in parts), None)
    if latent is not None:
        replace_file(meta / TOOLS_YAML, yaml.safe_dump(tools_config(latent), sort_keys=False))
