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


def test_a_seed_other_than_the_one_training_and_generation_build_under_is_refused():
    # a random-init tokenizer built under seed 1 would encode with another network than the one
    # vfm generate decodes with (built under seed 0)
    from vfm_curator.pipelines.shard_config import ShardConfig

    with pytest.raises(ValueError, match=r"option seed = 1 is not accepted; .*seed 0.*leave seed out"):
        ShardConfig.from_dict({"shard": {"seed": 1}}).stage_specs()
    ShardConfig.from_dict({"shard": {"seed": 0}}).stage_specs()


def test_building_a_tokenizer_leaves_the_callers_random_state_as_it_was():
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tokenizer("causal3d", {"latent_channels": 4, "base_channels": 8})
    assert torch.equal(torch.rand(3), expected)
