"""Data vfm did not make: what a folder of WebDataset tars needs before vfm can train on it.

Research data usually ships as WebDataset tars of raw media (``<key>.mp4`` + ``<key>.txt``) and
without energon's ``.nv-meta/`` index. vfm trains on latents and text embeddings, so such a folder
gets one line naming what it holds and the commands that lead from it to training, instead of a
refusal that only says what is missing.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from vfm_data.format import LATENT_PARTS, META_PART, TEXT_PARTS

#: Tar member suffixes of raw media as public video and image datasets ship them.
MEDIA_PARTS = frozenset({"mp4", "webm", "mkv", "avi", "mov", "m4v", "gif", "jpg", "jpeg", "png", "webp", "bmp", "tif",
                         "tiff", "wav", "flac", "mp3"})
_PEEK_MEMBERS = 32  # member headers read from the first shard: enough for a few samples' parts
_VFM_PARTS = ", ".join([*LATENT_PARTS, *TEXT_PARTS, META_PART])


def raw_media_hint(parts) -> str:
    """For a sample whose parts (member suffixes) include raw media and no latent: how to make vfm
    shards of it; else ``""``."""
    media = sorted(p for p in parts if p.rsplit(".", 1)[-1].lower() in MEDIA_PARTS)
    if not media or any(p in parts for p in LATENT_PARTS):
        return ""
    return (f"it holds raw media ({', '.join(media)}), not the latents and text embeddings vfm trains on "
            f"({_VFM_PARTS}): extract the tars into a folder (tar xf SHARD.tar -C videos; <key>.txt and <key>.json "
            "captions are read as sidecars), then vfm curate videos -o clips and vfm shard clips -o shards --tokenizer NAME --text-encoder NAME")


def member_parts(shard: Path, limit: int = _PEEK_MEMBERS) -> set[str]:
    """The part names (member name after the key's first dot) of the first ``limit`` files of a tar;
    empty when it cannot be read as one, or is not a regular file inside its folder: a folder from
    elsewhere may hold a named pipe (opening it waits forever) or a link to a file outside."""
    if not shard.is_file() or not shard.resolve().is_relative_to(shard.parent.resolve()):
        return set()
    parts: set[str] = set()
    try:
        with tarfile.open(shard, "r:") as tar:
            for _, member in zip(range(limit), tar):
                if member.isfile():
                    parts.add(member.name.rsplit("/", 1)[-1].partition(".")[2])
    except (tarfile.TarError, OSError, EOFError):
        return set()
    return parts


#: What ``vfm shard`` (vfm-curator) writes: its settings file at the top of its output folder, and
#: the val split's shards (``--val-fraction``) beside the train ones in a bucket folder.
SHARD_SETTINGS, VAL_SHARDS = "shard_config.json", "val-*.tar"


def vfm_shard_output(folder: Path) -> Path | None:
    """The ``vfm shard`` output folder ``folder`` is a bucket folder of (or is), by its settings file;
    None when there is none."""
    folder = Path(folder)
    return next((p for p in (folder.parent, folder) if (p / SHARD_SETTINGS).is_file()), None)


def prepare_commands(folder: Path) -> str:
    """The commands that write ``folder``'s energon index (``.nv-meta/``) the way vfm reads it. A bucket
    folder ``vfm shard`` wrote is indexed by ``vfm shard`` again: energon's --split-ratio and
    ``prepare_dataset``'s default name every shard train, its val shards too (held-out clips trained on)."""
    folder = Path(folder)
    out = vfm_shard_output(folder)
    val = folder.is_dir() and any(folder.glob(VAL_SHARDS))
    if out is None and not val:
        return (f"energon prepare {folder} --non-interactive --split-ratio 1,0,0 --sample-type CrudeWebdataset, "
                f"or vfm_data.prepare_dataset('{folder}')")
    out = out or folder.parent
    why = (f"; not energon prepare --split-ratio 1,0,0 or vfm_data.prepare_dataset('{folder}'), which would index "
           f"its {VAL_SHARDS} val shards as train" if val else "")
    return (f"run vfm shard into {out} again (vfm shard CLIPS -o {out} with the clips folder and options it was sharded "
            f"with): every run rebuilds a bucket's energon index from its shards, with its train and val split parts{why}")


def shardless_hint(folder: Path) -> str:
    """What a folder without ``.tar`` shards holds instead, and what to pass; ``""`` when it has shards,
    is not a folder or holds neither (no samples: each caller says what that means to it). vfm shard's
    output folder is the usual one: its blend file lists the buckets."""
    if not folder.is_dir() or any(folder.glob("*.tar")):
        return ""
    blends = sorted(p.name for p in folder.glob("*.yaml") if p.is_file())
    if "blend.yaml" in blends:
        return f"{folder} holds no .tar shards but a blend file: pass {folder / 'blend.yaml'}"
    datasets = sorted(p.name for p in folder.iterdir() if (p / ".nv-meta").is_dir())
    if datasets:
        shown = ", ".join(datasets[:8]) + (f" and {len(datasets) - 8} more" if len(datasets) > 8 else "")
        return (f"{folder} holds no .tar shards but the prepared dataset folders {shown}: pass one of them, or a "
                "blend of them (vfm_data.write_blend" + (f"; or one of its blend files: {', '.join(blends)}" if blends else "") + ")")
    return ""


def unprepared_hint(folder: Path) -> str:
    """What a folder without ``.nv-meta/`` holds and what to run on it; ``""`` when it holds no tars."""
    shards = sorted(folder.glob("*.tar")) if folder.is_dir() else []
    if not shards:
        return ""
    parts = member_parts(shards[0])
    media = raw_media_hint(parts)
    tars = f"{len(shards)} .tar shard{'s' * (len(shards) != 1)}"
    if media:
        return f"{folder} has {tars} but no energon index (.nv-meta/), and {media}"
    prepare = f"index it first: {prepare_commands(folder)}"
    if any(p in parts for p in LATENT_PARTS):
        return f"{folder} has {tars} of vfm samples but no energon index (.nv-meta/); {prepare}"
    found = ", ".join(sorted(parts)) or "no readable member"
    return (f"{folder} has {tars} but no energon index (.nv-meta/), and its first shard holds "
            f"{found}, not vfm samples ({_VFM_PARTS}, as vfm shard writes them)")
