"""JSON from elsewhere nested deeper than Python's reader follows (a 200-byte ``[[[[...]]]]`` of a
thousand levels) is a ``json.JSONDecodeError`` (a ``ValueError``) naming the place, as any other text
that does not parse: Python's own reader raises ``RecursionError``, which the handlers of every data
file vfm reads let through as a traceback."""

from __future__ import annotations

import json

import pytest

from vfm_plugins import json_data

DEEP = "[" * 100_000 + "]" * 100_000


def test_json_nested_deeper_than_python_reads_is_a_decode_error_at_the_place():
    text = '{"a": ' + DEEP + "}"
    with pytest.raises(json.JSONDecodeError, match=r"nested 100001 levels deep, deeper than Python's JSON reader follows") as info:
        json_data.loads(text)
    assert info.value.pos == 6 + 100_000 - 1  # the bracket that opens the deepest level
    with pytest.raises(ValueError):
        json_data.loads(DEEP.encode())  # bytes too, as json.loads takes them


def test_ordinary_json_reads_as_json_loads_reads_it():
    text = '{"a": [1, {"b": "[[[\\"]]"}], "c": null}'
    assert json_data.loads(text) == json.loads(text)
    assert json_data.loads(text.encode(), object_pairs_hook=dict) == json.loads(text)


def test_the_error_is_its_own_kind_for_callers_that_refuse_what_others_skip():
    with pytest.raises(json_data.NestedTooDeepError):
        json_data.loads("[" * 5000)  # unclosed too: the nesting is reached first
