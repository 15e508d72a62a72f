"""vfm_plugins.archives.check_stored_zip: the one check that vfm-data's shard members and vfm-models'
weight files go through before torch inflates a zip archive from elsewhere."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest
import torch

from vfm_plugins.archives import check_stored_zip


def _saved(state) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _deflated(raw: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    return out.getvalue()


def oversized(raw: bytes, claim: int) -> bytes:
    """torch.save's archive with its tensor record's central-directory entry claiming ``claim`` bytes."""
    raw, pos = bytearray(raw), 0
    while True:
        pos = raw.index(b"PK\x01\x02", pos)  # a central directory entry: size at +24, name length at +28, name at +46
        length = struct.unpack_from("<H", raw, pos + 28)[0]
        if bytes(raw[pos + 46:pos + 46 + length]).endswith(b"/data/0"):
            struct.pack_into("<I", raw, pos + 24, claim)
            return bytes(raw)
        pos += 4


def test_bytes_and_a_path_get_the_same_verdict(tmp_path):
    plain = _saved({"w": torch.zeros(1000)})
    for raw, match in ((_deflated(plain), r"record \S+ is compressed \(\d+ -> \d+ bytes\); accepted: torch\.save's"),
                       (oversized(plain, 3_000_000_000), r"record \S+/data/0 declares 3000000000 bytes, more than the \d+ "
                                                         r"bytes of the whole archive")):
        (tmp_path / "w.pt").write_bytes(raw)
        with pytest.raises(ValueError, match=match):
            check_stored_zip(raw)
        with pytest.raises(ValueError, match=rf"^w\.pt: {match}.*\(or safetensors\)$"):
            check_stored_zip(tmp_path / "w.pt", name="w.pt", accepted="torch.save's archive (or safetensors)")
    check_stored_zip(plain)  # what torch.save writes passes, as bytes and as a file
    (tmp_path / "plain.pt").write_bytes(plain)
    check_stored_zip(tmp_path / "plain.pt")
    check_stored_zip(b"\x80\x02legacy torch pickle, not a zip")  # not a zip archive: not this check's business
