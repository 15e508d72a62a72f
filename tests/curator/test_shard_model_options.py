"""The sharding run builds its tokenizer and text encoder through the plugin host: a misspelt option
is named with the options the model takes (it was Python's ``__init__() got an unexpected keyword
argument``, a traceback from ``vfm shard``)."""

import pytest

from vfm_curator.stages.shard_tokenize import build_registered, build_tokenizer
from vfm_plugins import PluginOptionError, UnknownNameError


def test_a_misspelt_tokenizer_option_names_the_accepted_ones():
    with pytest.raises(PluginOptionError, match=r"tokenizer 'pixel' \(from .*\) has no option patchh; accepted: patch"):
        build_tokenizer("pixel", {"patchh": 2})


def test_a_misspelt_text_encoder_option_names_the_accepted_ones():
    with pytest.raises(PluginOptionError, match=r"text encoder 'hash' .*has no option dimm; accepted: .*dim"):
        build_registered("text_encoders", "hash", {"dimm": 8})


def test_an_unknown_tokenizer_name_lists_the_registered_ones():
    with pytest.raises(UnknownNameError, match="pixel"):
        build_tokenizer("pixle")
