"""``vfm generate`` refuses an export whose config.json names a path outside it (``--weights-root``
admits a folder) and a TorchScript tokenizer unless ``--trust-torchscript``; nothing runs first."""

from __future__ import annotations

from typer.testing import CliRunner

from tests.models.test_export_trust import _export, cosmos_folder, marker  # noqa: F401 - fixtures
from vfm_cli.main import app


def _generate(export, out, *args):
    return CliRunner().invoke(app, ["generate", "--checkpoint", str(export), "--prompt", "1", "--steps", "1",
                                    "-o", str(out), *args])


def test_generate_names_the_outside_path_then_asks_for_trust_torchscript(tmp_path, marker, cosmos_folder):  # noqa: F811
    export = _export(tmp_path / "export", tokenizer="cosmos", tokenizer_options={"path": str(cosmos_folder)})
    result = _generate(export, tmp_path / "out", "--trust-torchscript")
    assert result.exit_code == 1 and "config.json key tokenizer_options.path" in result.output, result.output
    result = _generate(export, tmp_path / "out", "--weights-root", str(cosmos_folder.parent))
    assert result.exit_code == 1 and "--trust-torchscript" in result.output, result.output
    assert "Traceback" not in result.output
    assert not marker.exists()
