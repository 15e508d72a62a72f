"""Zip archives from elsewhere (a ``torch.save`` checkpoint, a shard's ``.pth`` member) checked before
a library inflates them. torch.save stores every record as it is; a deflated record grows up to 1000x
(a 100 KB member into a 100 MB tensor, a 10 MB download into 10 GB), and a record declaring more bytes
than the whole archive is forged (torch's reader fails on it with an internal miniz error that names
nothing). vfm-data's shard decoder and vfm-models' weight loaders share this one check."""

from __future__ import annotations

import io
import os
import zipfile
from os import PathLike

TORCH_SAVE = "torch.save's archive, whose records are stored uncompressed"


def check_stored_zip(source: bytes | str | PathLike, *, name: str = "", accepted: str = TORCH_SAVE) -> None:
    """Raise ``ValueError`` for the first record of the zip archive ``source`` (its bytes or a path)
    that is compressed or declares more bytes than the whole archive holds. Anything that is not a zip
    archive passes (torch's legacy format holds its bytes as they are). ``name`` (a path) starts the
    message; ``accepted`` says what is read instead."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        size, opened = len(source), io.BytesIO(source)
    else:
        size, opened = os.path.getsize(source), source
    if not zipfile.is_zipfile(opened):
        return
    prefix = f"{name}: " if name else ""
    with zipfile.ZipFile(opened) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"{prefix}record {info.filename} is compressed ({info.compress_size} -> {info.file_size} "
                                 f"bytes); accepted: {accepted}")
            if info.file_size > size:
                raise ValueError(f"{prefix}record {info.filename} declares {info.file_size} bytes, more than the "
                                 f"{size} bytes of the whole archive; accepted: {accepted}")
