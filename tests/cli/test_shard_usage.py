"""``vfm shard`` without --tokenizer or --text-encoder (and no --config) names the missing option(s)
and the registered names of each, before reading anything."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_models.plugins import host


def _flat(output: str) -> str:
    return " ".join(output.replace("│", " ").split())


@pytest.mark.parametrize("given, missing", [
    (["--tokenizer", "pixel"], ["--text-encoder"]),
    (["--text-encoder", "hash"], ["--tokenizer"]),
    ([], ["--tokenizer", "--text-encoder"]),
])
def test_shard_without_a_tokenizer_or_text_encoder_names_the_missing_one_and_the_registered_names(tmp_path, given, missing):
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "clips"), "-o", str(tmp_path / "shards"), *given])
    text = _flat(result.output)
    assert result.exit_code == 2, result.output
    kinds = {"--tokenizer": "tokenizers", "--text-encoder": "text_encoders"}
    for option in ("--tokenizer", "--text-encoder"):
        named = f"{option} (registered: {', '.join(host.names(kinds[option]))})"
        assert (named in text) == (option in missing), text
    assert not (tmp_path / "shards").exists()


def test_shard_of_a_folder_that_does_not_exist_says_so_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "nope"), "-o", str(tmp_path / "shards"), "--tokenizer", "pixel",
                                      "--text-encoder", "hash", "--runner", "serial", "--no-progress"])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == (f"error: {tmp_path / 'nope'} does not exist; expected the output folder of "
                                     "`vfm curate` (clips/ + clips.parquet)"), result.output
