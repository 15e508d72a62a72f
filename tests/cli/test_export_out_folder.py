"""``vfm export -o DIR``: DIR is new, empty, or an earlier export, which is replaced whole (written
beside it, then renamed into place); a folder holding other files is refused naming it (the export
was written beside those files)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_models.export import save_export
from tests.infer.tiny import tiny_dit, tiny_meta


def _source(folder, seed: int):
    model = tiny_dit(seed)
    save_export(folder, model, tiny_meta(config=model.config))
    return folder


def _export(src, out, fmt: str = "vfm"):
    return CliRunner().invoke(app, ["export", str(src), "--format", fmt, "-o", str(out)])


def test_exporting_into_a_folder_with_other_files_is_refused_naming_it_and_leaves_it_as_it_was(tmp_path):
    src = _source(tmp_path / "src", 0)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = _export(src, out)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"error: --out {out} is not empty and not an earlier export (it holds notes.txt)" in text, text
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "src"]


def test_an_empty_folder_takes_the_export(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    result = _export(_source(tmp_path / "src", 0), out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert result.output.strip() == f"vfm: {out}"


def test_exporting_over_an_earlier_export_replaces_it_whole_and_leaves_no_temporary_folder(tmp_path):
    out = tmp_path / "out"
    assert _export(_source(tmp_path / "a", 0), out).exit_code == 0
    result = _export(_source(tmp_path / "b", 1), out)
    assert result.exit_code == 0, result.output
    written, b, a = (load_file(folder / "model.safetensors") for folder in (out, tmp_path / "b", tmp_path / "a"))
    assert all(torch.equal(written[k], b[k]) for k in b) and not all(torch.equal(written[k], a[k]) for k in a)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "out"]
    assert oct(out.stat().st_mode & 0o777) == oct((tmp_path / "a").stat().st_mode & 0o777)


def test_an_export_that_fails_leaves_the_earlier_export_and_no_temporary_folder(tmp_path):
    out = tmp_path / "out"
    assert _export(_source(tmp_path / "a", 0), out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = _source(tmp_path / "bad", 1)
    meta = json.loads((bad / "config.json").read_text())
    meta["family"] = "no-such-family"
    (bad / "config.json").write_text(json.dumps(meta))
    result = _export(bad, out)
    assert result.exit_code == 1, result.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "bad", "out"]


@pytest.mark.parametrize("fmt", ["diffusers", "vfm"])
def test_exporting_a_run_into_its_own_export_folder_is_refused_and_keeps_the_export(tmp_path, fmt):
    """A run's export/ holds exactly an export's files, so it passed as an earlier export: written
    over with a diffusers folder, the run's vfm export was gone."""
    model = tiny_dit(0, in_channels=3, pos_embed="sincos2d", timestep_freq_shift=1)  # one a diffusers DiT takes
    export = tmp_path / "run" / "export"
    save_export(export, model, tiny_meta(config=model.config, latent_shape=[3, 1, 8, 8], tokenizer_options={"patch": 1}))
    before = {p.name: p.read_bytes() for p in export.iterdir()}
    result = _export(tmp_path / "run", export, fmt)
    assert result.exit_code == 1, result.output
    assert f"error: --out {export} is the export being read" in " ".join(result.output.split())
    assert {p.name: p.read_bytes() for p in export.iterdir()} == before
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["export"]
