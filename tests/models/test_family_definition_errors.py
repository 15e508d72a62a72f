"""A family whose preset or model class is defined wrongly is an error naming the family, the class
and what to define (the author's mistake), told apart from a wrong key in the user's own options."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from vfm_models.blocks.transformer import DiTBlock
from vfm_models.families import ModelFamily
from vfm_models.families.base import DiffusionTransformer
from vfm_models.families.config import TransformerConfig
from vfm_models.families.plan import ParallelPlanMissingError
from vfm_models.families.spec import PresetError
from vfm_plugins import PluginError


@dataclass
class NoPlanConfig(TransformerConfig):
    num_classes: int = 10


class NoPlanDiT(DiffusionTransformer):
    block_cls = DiTBlock  # forgot parallel_plan


FAMILY = ModelFamily(name="noplan-dit", config_cls=NoPlanConfig, build=NoPlanDiT,
                     presets={"tiny": dict(hidden=32, depth=2, num_heads=2), "typo": dict(hidden=32, heads=2, depth=2)})


def test_a_model_without_parallel_plan_names_its_class_the_method_and_what_it_returns():
    with torch.device("meta"):
        model = FAMILY.create("tiny")
    with pytest.raises(ParallelPlanMissingError) as err:
        model.parallel_plan()
    message = str(err.value)
    assert message.startswith(f"{__name__}.NoPlanDiT does not define parallel_plan(): define parallel_plan(self) in "
                              "NoPlanDiT returning a vfm_models.families.plan.ParallelPlan")
    assert "transformer_plan(self, {'attn.core': 'full'})" in message and "even in one process" in message
    # vfm prints a PluginError as one line; code that caught the bare NotImplementedError still does
    assert isinstance(err.value, PluginError) and isinstance(err.value, NotImplementedError)


def test_a_preset_key_the_config_class_lacks_is_the_presets_fault_naming_the_family_and_preset():
    with pytest.raises(PresetError) as err:
        FAMILY.config("typo", depth=4)
    assert str(err.value).startswith(
        f"family 'noplan-dit': its preset 'typo' sets heads, which its config class {__name__}.NoPlanConfig has no "
        "field for (a bug in the family's plugin, not in your options); the preset's keys must be among: ")
    assert "num_heads" in str(err.value)
    # not a TypeError: vfm train reports TypeError/ValueError from family.config as a bad model.options
    assert not isinstance(err.value, (TypeError, ValueError))


def test_a_key_of_the_users_options_the_config_lacks_names_the_accepted_keys_not_the_preset():
    with pytest.raises(TypeError) as err:
        FAMILY.config("tiny", heads=2)
    assert str(err.value).startswith("family 'noplan-dit' has no config key(s) heads (did you mean num_heads?); keys: "
                                     "adaln_lora_rank, ")
    assert "num_heads" in str(err.value) and "preset" not in str(err.value)


def test_a_misspelt_option_key_suggests_the_close_config_key_and_a_far_one_suggests_none():
    with pytest.raises(TypeError) as err:
        FAMILY.config("tiny", heads=2, kv_heads=1, zzz=3)
    assert str(err.value).startswith("family 'noplan-dit' has no config key(s) heads (did you mean num_heads?), kv_heads "
                                     "(did you mean num_kv_heads?), zzz; keys: adaln_lora_rank, "), err.value


def test_a_missing_parallel_plan_error_crosses_processes_with_its_message():
    # torchrun / spawn ranks hand errors back pickled: it was rebuilt from its message as if that were the model
    import pickle

    with torch.device("meta"):
        model = FAMILY.create("tiny")
    with pytest.raises(ParallelPlanMissingError) as err:
        model.parallel_plan()
    again = pickle.loads(pickle.dumps(err.value))
    assert (type(again), str(again)) == (ParallelPlanMissingError, str(err.value))
