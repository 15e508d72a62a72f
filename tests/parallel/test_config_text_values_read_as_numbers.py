"""A text key given an unquoted number, boolean or date (TOML reads ``2024`` as an integer, in the file and
in ``--set``, whose value is TOML too) says what the value was read as and how to quote it: as a ``--set``
item when ``--set`` gave it, as a file line when the file did."""

from __future__ import annotations

import pytest

from vfm_parallel.trainer.config import ConfigError, load
from vfm_parallel.trainer.config.reading import from_dict


@pytest.mark.parametrize("typed, read_as", [("2024", "an integer"), ("true", "a boolean"), ("1e3", "a number"),
                                            ("2024-01-01", "a date or time")])
def test_a_set_text_key_given_a_number_says_it_was_read_as_one_and_how_to_quote_it(tmp_path, typed, read_as):
    (tmp_path / "cfg.toml").write_text("")
    with pytest.raises(ConfigError) as info:
        load(tmp_path / "cfg.toml", [f"train.out_dir={typed}"])
    assert info.value.key == "train.out_dir"
    assert str(info.value).endswith(f"the value was read as {read_as}: quote it to keep it text, "
                                    f"--set 'train.out_dir=\"{typed}\"'")


def test_a_file_text_key_given_a_number_shows_the_quoted_file_line(tmp_path):
    (tmp_path / "cfg.toml").write_text("[train]\nout_dir = 2024\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path / "cfg.toml")
    assert str(info.value) == ("config key 'train.out_dir': expected str, got int 2024; the value was read as an "
                               "integer: quote it to keep it text, out_dir = \"2024\"")


def test_a_quoted_number_is_text_and_a_number_key_keeps_its_plain_message(tmp_path):
    (tmp_path / "cfg.toml").write_text('[data]\nsource = "synthetic"\n')
    assert load(tmp_path / "cfg.toml", ['train.out_dir="2024"']).train.out_dir == "2024"
    with pytest.raises(ConfigError) as info:
        from_dict({"train": {"steps": "ten"}})
    assert str(info.value) == "config key 'train.steps': expected int, got str 'ten'"
