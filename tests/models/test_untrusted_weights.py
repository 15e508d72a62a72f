"""A ``.pt`` / ``.pth`` weights file from someone else (``model.init_from``, ``vfm convert``, ``vfm
generate --checkpoint``) is read with ``weights_only`` and only as torch.save writes it: records
stored, not compressed. A deflated record would inflate up to 1000x in memory (a 100 KB file into
100 MB, 10 MB into 10 GB) before any shape check; it is refused naming the record."""

from __future__ import annotations

import io
import zipfile

import pytest
import torch

from vfm_models.adapters import AdapterConfigError, load_external
from vfm_models.checkpoint import load_state_dict


def _deflated(path, state) -> None:
    buf = io.BytesIO()
    torch.save(state, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))


def test_a_deflated_torch_archive_is_refused_before_it_inflates(tmp_path):
    state = {"weight": torch.zeros(2_500_000)}  # 10 MB of zeros in a ~10 KB file
    _deflated(tmp_path / "bomb.pt", state)
    assert (tmp_path / "bomb.pt").stat().st_size < 100_000
    with pytest.raises(ValueError, match=r"bomb\.pt: record .* is compressed \(\d+ -> \d+ bytes\); accepted: torch\.save's "
                                         r"archive, whose records are stored uncompressed"):
        load_state_dict(tmp_path / "bomb.pt")
    with pytest.raises(AdapterConfigError, match=r"bomb\.pt cannot be read as plain weights .* is compressed"):
        load_external(tmp_path / "bomb.pt")
    torch.save(state, tmp_path / "plain.pt")  # what torch.save writes still loads
    assert torch.equal(load_state_dict(tmp_path / "plain.pt")["weight"], state["weight"])


def test_a_record_declaring_more_bytes_than_the_file_is_refused_naming_it(tmp_path):
    """A forged size: torch.load failed with a RuntimeError about an internal miniz error that named
    neither the file nor the record (and was no ValueError, which the commands report as one line)."""
    from tests.plugins.test_archives import oversized

    buf = io.BytesIO()
    torch.save({"weight": torch.zeros(4)}, buf)
    (tmp_path / "big.pt").write_bytes(oversized(buf.getvalue(), 3_000_000_000))
    with pytest.raises(ValueError, match=r"big\.pt: record \S+/data/0 declares 3000000000 bytes, more than the \d+ bytes "
                                         r"of the whole archive; accepted: torch\.save's archive, whose records are stored "
                                         r"uncompressed \(or safetensors\)"):
        load_state_dict(tmp_path / "big.pt")
