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


def test_a_tokenizer_option_of_the_wrong_type_is_one_line_not_a_traceback(tmp_path):
    # patch = "2" in the TOML (a string): the tokenizer's own check fails with Python's TypeError;
    # the text encoder's setup already said it in one line (stage 'shard_text' could not be set up)
    config = tmp_path / "s.toml"
    config.write_text('[shard]\ntokenizer = "pixel"\ntext_encoder = "hash"\n[shard.tokenizer_options]\npatch = "2"\n')
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "clips"), "-o", str(tmp_path / "shards"), "--config", str(config)])
    assert result.exit_code == 1 and not isinstance(result.exception, TypeError), result.exception
    assert _flat(result.output).startswith("error: tokenizer 'pixel' could not be built from tokenizer_options {'patch': '2'}: "
                                           "TypeError: "), result.output
