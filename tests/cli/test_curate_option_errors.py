"""A bad value is reported against the option it came from: a command-line option's error names
that option (it said "Invalid value for --config" with no --config given), a config file's names
--config; a config file that is missing or not valid TOML is named, with the line for TOML."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app


def _flat(output: str) -> str:  # Typer's error box as one line (COLUMNS=300: paths are not wrapped)
    return " ".join(output.replace("│", " ").split())


GOOD = "[options.split]\nmin_clip_s = 0.5\n"
TYPO = "[options.split]\nthreshhold = 12\n"
BROKEN = "[run\nrunner =\n"


@pytest.mark.parametrize("config, args, hint, message", [
    (None, ["--shot-detector", "nope"], "--shot-detector", "unknown method 'nope'; accepted: adaptive, content"),
    (None, ["--shot-option", "foo"], "--shot-option", "accepted: KEY=VALUE"),
    (None, ["--dedup-threshold", "7"], "--dedup-threshold", "threshold = 7.0; accepted: a cosine similarity in (0, 1]"),
    (None, ["--caption-url", "http://localhost:1"], "--caption-url", "--caption-url needs --captioner"),
    (GOOD, ["--shot-detector", "nope"], "--shot-detector", "unknown method 'nope'"),
    (TYPO, ["--shot-detector", "adaptive"], "--config", "unknown option(s) threshhold"),
    (BROKEN, ["--shot-detector", "adaptive"], "--config", "c.toml is not valid TOML: Expected ']' at the end of a table "
                                                          "declaration (at line 1, column 5)"),
])
def test_a_bad_value_names_the_option_it_came_from(tmp_path, config, args, hint, message):
    extra = []
    if config is not None:
        (tmp_path / "c.toml").write_text(config)
        extra = ["--config", str(tmp_path / "c.toml")]
    result = CliRunner(env={"COLUMNS": "300"}).invoke(app, ["curate", str(tmp_path), "-o", str(tmp_path / "out"), *extra, *args])
    text = _flat(result.output)
    assert result.exit_code == 2 and f"Invalid value for {hint}: " in text and message in text, text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["curate", "IN"], ["shard", "IN", "--tokenizer", "pixel", "--text-encoder", "hash"]])
def test_a_missing_or_broken_config_file_is_named(tmp_path, command):
    command = [str(tmp_path) if a == "IN" else a for a in command]
    missing = CliRunner(env={"COLUMNS": "300"}).invoke(app, [*command, "-o", str(tmp_path / "out"), "--config", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2, missing.output
    assert f"config {tmp_path / 'nope.toml'} does not exist; accepted: a .toml or .json file" in _flat(missing.output)
    (tmp_path / "c.json").write_text('{"run": ')
    broken = CliRunner(env={"COLUMNS": "300"}).invoke(app, [*command, "-o", str(tmp_path / "out"), "--config", str(tmp_path / "c.json")])
    assert broken.exit_code == 2 and f"config {tmp_path / 'c.json'} is not valid JSON: " in _flat(broken.output), broken.output
