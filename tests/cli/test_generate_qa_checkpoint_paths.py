"""``vfm generate --checkpoint`` given something other than an export folder, or an export whose files
are damaged: one ``error:`` line saying which path or file is wrong and why (a missing path, a file,
the export's own weights file, invalid JSON, cut-short safetensors), never "does not match its model
config" for a file that cannot even be read."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app
from tests.cli.test_generate import make_export


def _error(tmp_path, checkpoint) -> str:
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(checkpoint), "--prompt", "1", "--steps", "1",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert not (tmp_path / "out").exists()
    return lines[0]


def test_a_checkpoint_path_that_does_not_exist_is_named_as_missing(tmp_path):
    assert _error(tmp_path, tmp_path / "nope") == (f"error: {tmp_path / 'nope'} does not exist (an inference export is a "
                                                   "folder with model.safetensors and config.json)")


def test_a_file_given_as_the_checkpoint_is_named_as_a_file(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    assert _error(tmp_path, tmp_path / "notes.txt") == (f"error: {tmp_path / 'notes.txt'} is a file (an inference export "
                                                        "is a folder with model.safetensors and config.json)")


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_file_of_an_export_given_as_the_checkpoint_names_its_folder(tmp_path, name):
    export = make_export(tmp_path / "export")
    assert _error(tmp_path, export / name) == (f"error: {export / name} is a file of the export {export}; give the "
                                               f"folder: --checkpoint {export}")


def test_an_export_whose_config_is_not_json_names_the_file(tmp_path):
    export = make_export(tmp_path / "export")
    (export / "config.json").write_text("{oops")
    assert _error(tmp_path, export) == (f"error: {export / 'config.json'} is not valid JSON: Expecting property name "
                                        "enclosed in double quotes at line 1, column 2 (char 1); export the model again "
                                        "or fix the file")


@pytest.mark.parametrize("keep", [0.1, 0.9])  # the header cut, the tensors cut
def test_an_export_whose_weights_are_cut_short_names_the_damaged_file(tmp_path, keep):
    export = make_export(tmp_path / "export")
    weights = export / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: int(len(data) * keep)])
    line = _error(tmp_path, export)
    assert line.startswith(f"error: {weights} cannot be read as safetensors (")
    assert line.endswith("the file is damaged or cut short (an interrupted copy?); copy or export it again")
    assert "does not match its model config" not in line
