"""Shard members are decoded as data only: a ``.pth`` holding a pickle that would run code, an
``.npy`` of Python objects, a header claiming a huge array, a deflated ``.pth`` archive or a
stride-0 ``.pth`` view (small members decoding to huge tensors), a symlink member and a ``../`` member
name are each skipped and counted as corrupt; nothing runs, nothing is extracted, the good samples
still arrive (real tars, prepared by energon, read by ``make_loader``)."""

from __future__ import annotations

import io
import json
import pathlib
import resource
import tarfile
import zipfile

import numpy as np
import pytest
import torch

from tests.data.helpers import meta, quiet
from vfm_data import ShardWriter, make_loader, prepare_dataset
from vfm_data.format import encode_array


class Touch:
    """Unpickling this creates the marker file: what a crafted pickle would do instead."""

    def __init__(self, marker) -> None:
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _add(tar, name, data=b"", **fields):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in fields.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data))


def _huge_npy_header() -> bytes:
    """An .npy whose header claims a (1000000, 1000000, 1, 1) float32 array (4 TB) over 64 bytes of data."""
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 1, 1, 1), np.float32))
    raw = buf.getvalue().replace(b"(1, 1, 1, 1)", b"(1000000, 1000000, 1, 1)")
    return raw + bytes(64)


def _deflated_pth(tensor) -> bytes:
    """torch.save's archive with its records deflated (zeros compress ~1000x: a bomb at scale)."""
    buf = io.BytesIO()
    torch.save(tensor, buf)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    return out.getvalue()


def _stride_zero_pth(shape) -> bytes:
    """One stored float viewed as ``shape`` (stride 0): (4, 1, 10**5, 10**5) is 160 GB from 1.5 KB."""
    buf = io.BytesIO()
    torch.save(torch.zeros(1).expand(*shape), buf)
    return buf.getvalue()


def test_members_that_would_run_code_or_escape_are_skipped_and_run_nothing(tmp_path):
    marker = tmp_path / "marker"
    data = tmp_path / "data"
    good = torch.randn(4, 1, 4, 4)
    with ShardWriter(data, max_shard_bytes=1 << 20) as w:
        for i in range(4):
            w.write(f"good{i}", good, torch.randn(2, 8), meta("image"))
    text, js = encode_array(torch.randn(2, 8), "npy"), json.dumps(meta("image").to_json()).encode()
    pickled = io.BytesIO()
    torch.save({"x": Touch(marker)}, pickled)
    objects = io.BytesIO()
    np.save(objects, np.array([Touch(marker)], dtype=object), allow_pickle=True)
    bad = {"pth": ("latent.pth", pickled.getvalue()), "objnpy": ("latent.npy", objects.getvalue()),
           "hugenpy": ("latent.npy", _huge_npy_header()),
           "deflated": ("latent.pth", _deflated_pth(torch.zeros(4, 1, 4, 4))),
           "strided": ("latent.pth", _stride_zero_pth((10**6, 1, 2, 2)))}
    with tarfile.open(data / "shard-000001.tar", "w") as tar:
        for key, (part, payload) in bad.items():
            _add(tar, f"{key}.{part}", payload)
            _add(tar, f"{key}.text.npy", text)
            _add(tar, f"{key}.json", js)
        _add(tar, "link.latent.npy", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        _add(tar, "link.text.npy", text)
        _add(tar, "link.json", js)
        _add(tar, "../../escape.latent.npy", encode_array(good, "npy"))
        _add(tar, "../../escape.text.npy", text)
        _add(tar, "../../escape.json", js)
        _add(tar, "good4.latent.npy", encode_array(good, "npy"))
        _add(tar, "good4.text.npy", text)
        _add(tar, "good4.json", js)
    quiet(prepare_dataset, data)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loader = make_loader(data, patch_size=2, batch_size=2, streams=1, shuffle_buffer=None)
    with pytest.warns(UserWarning):
        keys = {k for _ in range(8) for k in next(loader).keys}
    assert not marker.exists()
    assert {f"good{i}" for i in range(5)} <= keys
    assert not keys & set(bad) and "link" not in keys
    assert loader.counts["corrupt"] >= len(bad)
    assert not (tmp_path / "escape.latent.npy").exists() and not (tmp_path.parent / "escape.latent.npy").exists()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000  # KB: the 4 TB header allocated nothing


def test_an_npy_header_claiming_more_than_its_bytes_is_refused_before_numpy_reserves_it():
    """12 GB claimed over 64 bytes: numpy would reserve the memory first (and an overcommitting
    kernel grants it); the claim is checked against the stored bytes instead."""
    from vfm_data.format import decode_array

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (3_000_000_000,)})
    with pytest.raises(ValueError, match=r"header declaring \(3000000000,\) float32 \(12000000000 bytes\) over 64 stored bytes"):
        decode_array(buf.getvalue() + bytes(64), "npy")
    short = encode_array(torch.randn(2, 3), "npy")[:-4]  # a truncated member
    with pytest.raises(ValueError, match="over 20 stored bytes"):
        decode_array(short, "npy")
    assert decode_array(encode_array(torch.randn(2, 3), "npy"), "npy").shape == (2, 3)
