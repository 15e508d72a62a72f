"""Family options as a user types them (a TOML file, ``--set model.options.K=V``): each wrong value is one
ValueError naming the option and what is accepted, raised when the config is made, not in torch or later."""

from __future__ import annotations

import pytest

import vfm_models

BAD = [
    ({"attention_backend": "flashy"}, "attention_backend must be None .automatic. or one of sdpa, flash, te"),
    ({"depth": 0}, "depth must be an integer >= 1; got 0"),  # built a model with no blocks
    ({"depth": -1}, "depth must be an integer >= 1"),
    ({"num_heads": 0}, "num_heads must be an integer >= 1"),  # ZeroDivisionError
    ({"hidden": "64"}, "hidden must be an integer >= 1; got '64'"),  # "not all arguments converted"
    ({"in_channels": 0}, "in_channels must be an integer >= 1"),  # built and ran on 0 channels
    ({"mlp_ratio": 0}, "mlp_ratio must be a finite number > 0"),
    ({"rope_theta": 0.0}, "rope_theta must be a finite number > 0"),
    ({"num_kv_heads": 0}, "num_kv_heads must be None .= num_heads. or an integer >= 1"),  # silently num_heads
    ({"text_dim": -1}, "text_dim must be an integer >= 0"),  # "Trying to create tensor with negative dimension"
    ({"adaln_lora_rank": -1}, "adaln_lora_rank must be an integer >= 0"),
    ({"num_classes": -3}, "num_classes must be an integer >= 0"),
    ({"qk_norm": "yes"}, "qk_norm must be true or false"),
]


@pytest.mark.parametrize("family", ["dit-cross", "wan"])
@pytest.mark.parametrize("overrides, message", BAD, ids=[next(iter(o)) + "=" + repr(next(iter(o.values()))) for o, _ in BAD])
def test_a_wrong_family_option_is_one_value_error_naming_it_when_the_config_is_made(family, overrides, message):
    with pytest.raises(ValueError, match=message):
        vfm_models.get_family(family).config("tiny", **overrides)



FAMILY_BAD = [
    ("wan", {"hidden": 10, "num_heads": 2}, r"pos_embed 'rope' needs an even head_dim \(hidden / num_heads\) >= 6; got 5"),
    ("dit-cross", {"pos_embed": "rope", "hidden": 32, "num_heads": 8}, r"even head_dim .* >= 6; got 4"),
    ("dit", {"pos_embed": "sincos2d", "hidden": 30, "num_heads": 3}, "pos_embed 'sincos2d' needs hidden divisible by 4"),
    ("wan", {"eps": 0.0}, "wan's eps must be a finite number > 0"),  # built; LayerNorm eps 0
    ("wan", {"eps": -1.0}, "wan's eps must be a finite number > 0"),
    ("wan", {"timestep_scale": 0}, "wan's timestep_scale must be a finite number > 0"),
    ("stdit", {"full_attention_blocks": 1}, r"full_attention_blocks must be a list of block indices"),  # TypeError
]


@pytest.mark.parametrize("family, overrides, message", FAMILY_BAD,
                         ids=[f"{f}-" + "-".join(map(str, o.values())) for f, o, _ in FAMILY_BAD])
def test_options_a_family_or_its_position_table_cannot_take_are_refused_when_the_config_is_made(family, overrides,
                                                                                               message):
    """These built, and failed at the first forward (the position tables) or not at all (wan's eps)."""
    with pytest.raises(ValueError, match=message):
        vfm_models.get_family(family).config("tiny", **overrides)
