"""Opening a file as a video container, with a clear reason when it is not one, and choosing the
video stream every reader of a source uses (not cover art or a thumbnail).

NVDEC is used through PyAV's hardware acceleration when asked for (``hwaccel="cuda"``) and an
NVIDIA device is present; otherwise decoding is on the CPU. Both give the same frames.
"""

from __future__ import annotations

import logging
import os

from vfm_curator.errors import InputError
from vfm_curator.io.inputs import link_problem

# the name io.video logged under before the split: log filters and captures keep working
log = logging.getLogger("vfm_curator.video")


def open_container(path: str, hwaccel: str | None = None):
    """Open ``path`` with PyAV; an unusable file raises :class:`InputError` naming the problem."""
    import av

    if os.path.islink(path) and not os.path.exists(path):
        raise InputError(link_problem(path))
    if not os.path.isfile(path):
        raise InputError(f"not a file: {path}")
    if os.path.getsize(path) == 0:
        raise InputError("empty file (0 bytes)")
    container = _open_hwaccel(path, hwaccel) if hwaccel else None
    if container is None:
        try:
            container = av.open(path)
        except av.FFmpegError as exc:
            raise InputError(f"cannot open as a video container: {_ffmpeg_reason(exc)}{_content_hint(path)}") from exc
    if not _playable(container):
        kinds = [s.type if s.type != "video" else "video (a still picture)" for s in container.streams] or ["none"]
        container.close()
        raise InputError(f"no video stream (streams: {', '.join(sorted(set(kinds)))})")
    return container


def _ffmpeg_reason(exc) -> str:
    """FFmpeg's reason without its errno number and the path (the failure record names the file)."""
    reason = getattr(exc, "strerror", None) or str(exc)
    return str(reason).rstrip(".")


def _content_hint(path: str) -> str:
    """What an unopenable file looks like from its first bytes, when that says more than FFmpeg:
    an image or a web page saved with a video extension, or an MP4/MOV whose index never got written."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return ""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return f" (the file is {what}, not a video)"
    if head.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return " (the file is a web page (HTML), not a video: a failed download?)"
    if head[4:8] == b"ftyp" and not _has_top_box(path, b"moov"):
        return (" (an MP4/MOV file without its index (no 'moov' box): a download or recording that was "
                "cut off before it finished; it cannot be read without the index)")
    return ""


_MAGIC = ((b"\xff\xd8\xff", "a JPEG image"), (b"\x89PNG", "a PNG image"), (b"GIF8", "a GIF image"),
          (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a ZIP archive"))


def _has_top_box(path: str, kind: bytes) -> bool:
    """Whether an ISO BMFF (MP4/MOV) file has a top-level box ``kind`` (walks the box headers only)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        offset = 0
        while offset + 8 <= size:
            fh.seek(offset)
            header = fh.read(16)
            length, box = int.from_bytes(header[:4], "big"), header[4:8]
            if box == kind:
                return True
            if length == 1 and len(header) == 16:
                length = int.from_bytes(header[8:16], "big")
            if length < 8:  # 0: to the end of the file; anything else under 8 is damage
                return False
            offset += length
    return False


#: stream dispositions of a video stream that is a picture, not the video: cover art (mp4 ``covr``,
#: mkv attachments), thumbnails, still images
_PICTURE = ("attached_pic", "timed_thumbnails", "still_image")


def _is_picture(stream) -> bool:
    from av.stream import Disposition

    return any(stream.disposition & getattr(Disposition, name, 0) for name in _PICTURE)


def _playable(container) -> bool:
    return any(not _is_picture(s) for s in container.streams.video)


def video_stream(container):
    """The video stream to read, as the ``ffmpeg`` command line picks it: the highest resolution, ties
    the first; never a picture (cover art or a thumbnail by its disposition, e.g. an mp4's poster,
    nor a one-frame still among streams that move, e.g. an mkv's cover without the flag). Every
    reader of a source uses this stream."""
    candidates = [s for s in container.streams.video if not _is_picture(s)] or list(container.streams.video)
    if len(candidates) > 1:
        frames = _frame_counts(container, candidates)
        if max(frames.values()) > 1:  # a stream with one frame beside moving ones is a picture
            candidates = [s for s in candidates if frames[s.index] > 1]
    return max(candidates, key=lambda s: (s.codec_context.width * s.codec_context.height, -s.index))


#: Packets of a file read to tell stills from moving streams where its container keeps no frame count.
_PACKETS_LOOKED_AT = 512

#: Packet counts already read, by (file, size, mtime, streams): every reader of a source (probe, decoder,
#: frame reading) picks its stream, and each pick of an mkv/ts would open the file again and read up to
#: :data:`_PACKETS_LOOKED_AT` packets. A file rewritten since (another size or time) is read again.
_COUNTED: dict[tuple, dict[int, int]] = {}
_COUNTED_KEPT = 256  # files remembered per process: a curation reads each video a few times in a row

#: How many times this process read a file's packets to count frames (the cache's misses): tests read it.
packet_counts_read = 0


def _frame_counts(container, streams) -> dict[int, int]:
    """Frames of each stream, at least up to 2: the container's counts when it keeps them (mp4), else
    the packets among the file's first :data:`_PACKETS_LOOKED_AT` (mkv, ts), read from a second
    opening so the caller's container stays at its start (a raw stream cannot seek back), once per
    file version in this process (:data:`_COUNTED`)."""
    counts = {s.index: int(s.frames or 0) for s in streams}
    if all(counts.values()):
        return counts
    key = _file_key(container.name, counts)
    if key is not None and key in _COUNTED:
        return dict(_COUNTED[key])
    counts, readable = _count_packets(container.name, counts)
    if key is not None and readable:
        while len(_COUNTED) >= _COUNTED_KEPT:
            del _COUNTED[next(iter(_COUNTED))]  # the oldest: its video was read through by now
        _COUNTED[key] = dict(counts)
    return counts


def _file_key(name, indexes: dict[int, int]) -> tuple | None:
    try:
        st = os.stat(name)
    except (OSError, TypeError, ValueError):  # not a file name (a stream opened from memory): not cached
        return None
    return os.fspath(name), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, tuple(sorted(indexes))


def _count_packets(name, indexes: dict[int, int]) -> tuple[dict[int, int], bool]:
    """(packets of each stream among the first :data:`_PACKETS_LOOKED_AT`, at least up to 2; whether
    the file could be read: if not, every stream counts 2, none is taken for a still)."""
    import av

    global packet_counts_read
    packet_counts_read += 1
    counts = dict.fromkeys(indexes, 0)
    try:
        with av.open(name) as again:
            for k, packet in enumerate(again.demux(*(again.streams.video[i] for i in _positions(again, counts)))):
                if packet.size and packet.stream.index in counts:
                    counts[packet.stream.index] += 1
                if k >= _PACKETS_LOOKED_AT or min(counts.values()) >= 2:
                    break
    except (av.FFmpegError, OSError, ValueError):
        return dict.fromkeys(counts, 2), False
    return counts, True


def _positions(container, indexes: dict[int, int]) -> list[int]:
    """Positions in ``container.streams.video`` of the streams with these (file-wide) indexes."""
    return [k for k, s in enumerate(container.streams.video) if s.index in indexes]


_HWACCEL_REFUSED: set[str] = set()


def _open_hwaccel(path: str, device_type: str):
    """``path`` opened with PyAV's ``device_type`` hwaccel, or None when the device cannot be created
    here (FFmpeg fails the open itself, e.g. EPERM for ``cuda`` without a GPU, although software
    fallback was asked for): the caller then opens it in software, and the device is named once
    per process, so the machine's missing GPU does not read as every video's fault."""
    import av
    from av.codec.hwaccel import HWAccel

    if device_type in _HWACCEL_REFUSED:
        return None
    try:
        return av.open(path, hwaccel=HWAccel(device_type=device_type, allow_software_fallback=True))
    except av.FFmpegError as exc:
        try:
            with av.open(path):
                pass
        except av.FFmpegError:
            raise InputError(f"cannot open as a video container: {exc}") from exc
        _HWACCEL_REFUSED.add(device_type)
        log.warning("hwaccel %r is not usable on this machine (%s); decoding in software", device_type, exc)
        return None
