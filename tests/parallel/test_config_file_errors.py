"""A training config file that cannot be read is named as a file (``no config file at PATH``, a
folder, not TOML), with what is accepted; not as a config key ``'<file>'``."""

from __future__ import annotations

import pytest

from vfm_parallel.trainer.config import ConfigError, load

ACCEPTED = "accepted: a TOML training config file (e.g. configs/tiny.toml)"


def test_a_missing_file_is_named_as_missing_not_as_a_key(tmp_path):
    with pytest.raises(ConfigError) as info:  # still a ConfigError: callers catch it as before
        load(tmp_path / "nope.toml")
    assert str(info.value) == f"no config file at {tmp_path / 'nope.toml'}; {ACCEPTED}"


def test_a_folder_and_a_broken_file_are_named(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert str(info.value) == f"{tmp_path} is a folder, not a config file; {ACCEPTED}"
    (tmp_path / "broken.toml").write_text("[model\n")
    with pytest.raises(ConfigError) as info:
        load(tmp_path / "broken.toml")
    assert str(info.value).startswith(f"{tmp_path / 'broken.toml'} is not valid TOML: ")
