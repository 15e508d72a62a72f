"""``vfm train`` on a config file that is not there prints one line naming the file and what is
accepted (it printed ``error: config key '<file>': no config file at ...``)."""

from __future__ import annotations

from typer.testing import CliRunner

from vfm_cli.main import app


def test_train_names_a_missing_config_file(tmp_path):
    for args in (["--validate"], []):
        result = CliRunner().invoke(app, ["train", str(tmp_path / "nope.toml"), *args])
        assert result.exit_code == 1
        assert result.output.strip() == (f"error: no config file at {tmp_path / 'nope.toml'}; "
                                         f"accepted: a TOML training config file (e.g. configs/tiny.toml)")
