"""The check shared by the format-version tests: a refused file is one line naming each thing the user
needs (the file, its version, the versions read, the upgrade)."""

from __future__ import annotations


def assert_one_line_naming(message: str, *parts: str) -> None:
    assert "\n" not in message, message
    for part in parts:
        assert part in message, (part, message)
