"""A ``GenerationSpec`` field of the wrong type is a ValueError naming the field before any work, not a
TypeError from torch (seed=1.5), a video generated anyway (seed=True) or an unpacking error (size=(16,))."""

from __future__ import annotations

import pytest

from vfm_infer.pipeline import GenerationSpec, VideoPipeline, check_spec
from tests.infer.tiny import tiny_dit, tiny_meta


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"seed": 1.5}, "seed must be an integer, got 1.5"),
        ({"seed": True}, "seed must be an integer, got True"),
        ({"guidance": "2"}, "guidance must be a number (1 = off) or None for the export's, got '2'"),
        ({"size": (16,)}, "size must be (height, width) in whole pixels or None for the training size, got (16,)"),
        ({"frames": 2.5}, "frames must be an integer or None for the training clips' length, got 2.5"),
        ({"negative_prompt": None}, "negative_prompt must be a string ('' for none), got None"),
        ({"decode_tile": 2.0}, "decode_tile must be an integer or None, got 2.0"),
    ],
)
def test_a_spec_field_of_the_wrong_type_is_named_before_any_work(fields, message):
    spec = GenerationSpec(steps=1, **fields)
    with pytest.raises(ValueError) as no_model:
        check_spec(spec)
    assert message in str(no_model.value)
    with pytest.raises(ValueError) as with_model:
        VideoPipeline(tiny_dit(), tiny_meta()).generate("1", spec)
    assert message in str(with_model.value)

