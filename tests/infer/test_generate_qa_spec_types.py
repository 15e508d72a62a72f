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



def test_prompts_that_are_not_strings_are_refused_naming_what_generate_and_prepare_take():
    """generate(["a", "b"]) was "TypeError: unhashable type: 'list'"; prepare(spec, "a cat") took each
    letter for a prompt."""
    pipe = VideoPipeline(tiny_dit(), tiny_meta())
    spec = GenerationSpec(steps=1)
    with pytest.raises(ValueError, match=r"generate takes one prompt \(a str\) and makes one video; got a list: "
                                         r"call it once per prompt"):
        pipe.generate(["1", "2"], spec)
    with pytest.raises(ValueError, match=r"prompts must be a list of strings; got a str \(one prompt: \[prompt\]\)"):
        pipe.prepare(spec, "1")
    with pytest.raises(ValueError, match=r"prompts must be strings; prompt 1 is a int"):
        pipe.prepare(spec, ["1", 2])
    pipe.prepare(spec, ("1", "2"))  # a tuple of strings is a list of prompts too
