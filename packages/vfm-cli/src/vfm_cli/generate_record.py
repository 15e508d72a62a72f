"""``OUT/generate.json``: what ``vfm generate`` made the videos of a folder from (export, prompts, every
setting that changes a video) and which videos are finished, so ``--resume`` keeps those and generates the
rest, and a folder of videos says how it was made."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

RECORD = "generate.json"
#: far above what vfm writes (about 200 bytes a video); a larger file is not a record of this command
MAX_RECORD_BYTES = 64 << 20


def weights_identity(checkpoint: Path, out: Path) -> list:
    """(relative path, size, mtime) of every file of the export or checkpoint: re-exported or retrained
    weights at the same path make other videos. Stat calls only: hashing a large model at every run is not.
    An output folder inside the export (``-o EXPORT/videos``) is not part of it: its files change every run."""
    root, videos = checkpoint.resolve(), out.resolve()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*")
                                                 if p.is_file() and not p.is_relative_to(videos))
    stats = [(p, p.stat()) for p in files]
    return [[str(p.relative_to(root)) if p != root else p.name, st.st_size, st.st_mtime_ns] for p, st in stats]


def request(checkpoint: Path, out: Path, prepared, pipe, *, fps: float) -> dict[str, Any]:
    """Every input to the videos but the prompts (compared one by one: appending prompts keeps the videos
    of the ones before), as JSON values."""
    spec = prepared.spec
    return {
        "checkpoint": str(checkpoint.resolve()),
        "weights": weights_identity(checkpoint, out),
        "sampler": type(prepared.sampler).__name__,
        "sampler_options": dict(spec.sampler_options),
        "steps": spec.steps,
        "guidance": spec.guidance,
        "negative_prompt": spec.negative_prompt,
        "seed": spec.seed,
        "frames": spec.frames,
        "size": list(spec.size) if spec.size else None,
        "latent_shape": list(prepared.latent_shape),
        "decode_tile": spec.decode_tile,
        "decode_chunk": spec.decode_chunk_frames,
        "fps": fps,
        "device": pipe.device.type,
        "dtype": str(pipe.dtype).removeprefix("torch."),
    }


def _stamp(path: Path) -> list[int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def finished_entry(out: Path, index: int, prompt: str) -> dict[str, Any]:
    """What the record holds of a finished video: its prompt and the size and time of both its files (a file
    replaced or changed since is not this request's)."""
    return {"prompt": prompt, "mp4": _stamp(out / f"{index:04d}.mp4"), "png": _stamp(out / f"{index:04d}.png")}


def _read_record(path: Path) -> tuple[dict, dict]:
    """(request, videos) of the record at ``path``, a folder's file that may come from elsewhere: a link,
    a named pipe (opening one waited for a writer forever) or a device is refused, not followed or waited
    on, and so is a file too large or not shaped as vfm writes it; FileNotFoundError when there is none,
    ValueError naming the problem otherwise."""
    from vfm_plugins.files import NotRegularFileError, open_regular
    from vfm_plugins.json_data import loads

    try:
        fd = open_regular(path)
    except NotRegularFileError:
        raise ValueError("it is not a regular file (a named pipe, device or socket)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("it is a symbolic link (accepted: the regular file vfm generate writes)") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        text = fh.read(MAX_RECORD_BYTES + 1)
    if len(text) > MAX_RECORD_BYTES:
        raise ValueError(f"larger than {MAX_RECORD_BYTES >> 20} MiB, far above what vfm generate writes")
    record = loads(text)
    request, videos = (record.get("request"), record.get("videos")) if isinstance(record, dict) else (None, None)
    if not isinstance(request, dict) or not isinstance(videos, dict):
        raise ValueError('not a record of vfm generate (accepted: an object with a "request" and a "videos" object)')
    return request, videos


def kept_videos(out: Path, asked: dict[str, Any], prompts: list[str]) -> list[int]:
    """The indices of this request's finished videos in ``out``; a ValueError saying what differs when
    ``out`` holds no record, or one of another request."""
    path = out / RECORD
    try:
        earlier, finished = _read_record(path)
    except FileNotFoundError:
        raise ValueError(f"--resume: {out} holds no {RECORD} (vfm generate writes it beside the videos): nothing to "
                         "resume; leave out --resume to generate every video") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"--resume: {path} cannot be read ({exc}); leave out --resume to generate every video") from None
    differ = [f"{key} {earlier.get(key)!r} (this run: {value!r})" for key, value in asked.items()
              if key != "weights" and earlier.get(key) != value]
    if earlier.get("weights") != asked["weights"] and earlier.get("checkpoint") == asked["checkpoint"]:
        differ.append("the checkpoint's files (changed since)")
    if differ:
        raise ValueError(f"--resume: the videos in {out} were generated with {'; '.join(differ)}; give the same "
                         "options to resume them, or leave out --resume to replace them")
    kept = []
    for i, prompt in enumerate(prompts):
        entry = finished_entry(out, i, prompt)
        if entry["mp4"] is not None and entry["png"] is not None and finished.get(f"{i:04d}") == entry:
            kept.append(i)
    return kept


def remove_leftover_records(out: Path) -> None:
    """Remove the temporary files of a record a killed run was writing (``.generate.json.<random>.tmp``,
    as :func:`write_record` names them: a SIGKILL between writing and renaming leaves one)."""
    from vfm_plugins.files import remove_leftover

    for path in out.glob(f".{RECORD}.*.tmp"):
        remove_leftover(path)


def write_record(out: Path, asked: dict[str, Any], finished: dict[str, Any]) -> None:
    """``OUT/generate.json``, replaced whole (a stop leaves the previous one)."""
    from vfm_plugins.files import replace_file

    replace_file(out / RECORD, json.dumps({"request": asked, "videos": finished}, indent=2) + "\n")
