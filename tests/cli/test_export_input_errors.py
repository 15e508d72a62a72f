"""``vfm export`` of an export whose config.json it refuses (a key missing, not JSON, a family that is no
family) prints one ``error:`` line and exits 1, whatever the refusal's type, as the other commands do:
no traceback for bad input. Real exports written by ``save_export``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import vfm_models
from vfm_cli.main import app
from vfm_models.export import CONFIG, save_export


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    model = vfm_models.get_family("dit").create("tiny")
    return save_export(tmp_path_factory.mktemp("src") / "export", model,
                       {"family": "dit", "config": model.config, "formulation": "edm"}, for_generation=False)


def _broken(export, tmp_path, edit) -> object:
    import shutil

    folder = tmp_path / "broken"
    shutil.copytree(export, folder)
    meta = json.loads((folder / CONFIG).read_text())
    (folder / CONFIG).write_text(edit(meta))
    return folder


def _vfm_export(src, out, fmt):
    return CliRunner().invoke(app, ["export", str(src), "--format", fmt, "-o", str(out)])


@pytest.mark.parametrize("fmt", ["vfm", "diffusers"])
@pytest.mark.parametrize(("edit", "named"), [
    (lambda m: json.dumps({k: v for k, v in m.items() if k != "family"}), "lacks family; an export needs family, config"),
    (lambda m: json.dumps({k: v for k, v in m.items() if k != "config"}), "lacks config"),
    (lambda m: "{not json", "is not valid JSON"),
], ids=["no-family", "no-config", "not-json"])
def test_an_export_whose_config_json_is_refused_is_one_error_line_not_a_traceback(export, tmp_path, fmt, edit, named):
    src = _broken(export, tmp_path, edit)
    result = _vfm_export(src, tmp_path / "out", fmt)
    # an exception the command let through would be result.exception itself (the traceback a shell shows)
    assert (result.exit_code, type(result.exception)) == (1, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], result.stderr
    assert str(src / CONFIG) in lines[0]
    assert not (tmp_path / "out").exists()
