"""An option a tokenizer, text encoder or formulation does not take is an error naming the option, the
component and the options it accepts, whether the class is called directly (``get_formulation("edm")(...)``),
built by name (``vfm_models.build_formulation``) or built from an export's options by the inference
pipeline; not Python's ``__init__() got an unexpected keyword argument``. Components taking ``**kwargs``
(plugins') still get every option."""

from __future__ import annotations

import pytest

import vfm_models
from vfm_models.options import named_options
from vfm_plugins import PluginOptionError

CASES = [
    ("formulation", "edm", vfm_models.get_formulation, "EDM", "sigma_data, P_mean, P_std, sigma_min, sigma_max, rho"),
    ("tokenizer", "pixel", vfm_models.get_tokenizer, "PixelTokenizer", "patch, channels"),
    ("text encoder", "hash", vfm_models.get_text_encoder, "HashTextEncoder", "dim, max_length, pad_to_max_length"),
]


@pytest.mark.parametrize("kind, name, get, cls, accepted", CASES)
def test_a_direct_call_with_an_unknown_option_names_it_the_component_and_the_accepted_options(kind, name, get, cls,
                                                                                               accepted):
    with pytest.raises(PluginOptionError) as info:  # a TypeError, as Python's was
        get(name)(bogus=1)
    assert str(info.value) == f"{kind} {cls} has no option bogus; accepted: {accepted}"


@pytest.mark.parametrize("build, name", [(vfm_models.build_formulation, "rectified-flow"),
                                         (vfm_models.build_tokenizer, "causal3d"),
                                         (vfm_models.build_text_encoder, "hash")])
def test_building_by_name_names_the_registered_name_and_its_options(build, name):
    with pytest.raises(PluginOptionError, match=f"'{name}' \\(from vfm-models .*\\) has no option bogus; accepted: "):
        build(name, bogus=1)


@pytest.mark.parametrize("name", ["t5", "minilm"])
def test_the_hf_text_encoders_name_their_options_instead_of_forwarding_kwargs(name):
    with pytest.raises(PluginOptionError) as info:  # refused before the folder or package is looked at
        vfm_models.get_text_encoder(name)(bogus=1)
    assert "has no option bogus; accepted: " in str(info.value) and "pad_to_max_length" in str(info.value)


def test_every_built_in_names_an_unknown_option():
    for kind, names in (("tokenizers", ["pixel", "causal3d", "cosmos", "wan-vae", "sd-vae"]),
                        ("text_encoders", ["hash", "t5", "minilm"]),
                        ("formulations", ["edm", "rectified-flow", "ddpm"])):
        for name in names:
            with pytest.raises(PluginOptionError, match="has no option bogus; accepted: "):
                vfm_models.host.get(kind, name)(bogus=1)


def test_a_component_taking_kwargs_and_a_subclass_with_more_options_keep_working():
    @named_options("tokenizer")
    class Open:
        def __init__(self, **options):
            self.options = options

    assert Open(anything=1).options == {"anything": 1}

    @named_options("tokenizer")
    class Base:
        def __init__(self, patch: int = 1):
            self.patch = patch

    class Plugin(Base):  # a plugin's subclass with an option of its own
        def __init__(self, scale: float = 1.0, **kwargs):
            super().__init__(**kwargs)
            self.scale = scale

    made = Plugin(scale=2.0, patch=2)
    assert (made.scale, made.patch) == (2.0, 2)
    with pytest.raises(PluginOptionError, match="tokenizer Plugin has no option bogus; accepted: scale, patch$"):
        Plugin(bogus=1)


def test_an_exports_unknown_formulation_option_is_named_by_the_pipeline():
    from vfm_infer.pipeline import VideoPipeline
    from tests.infer.tiny import tiny_dit, tiny_meta

    meta = tiny_meta()
    meta["formulation_options"] = {**meta["formulation_options"], "sigmadata": 0.5}
    with pytest.raises(PluginOptionError, match="formulation 'edm' .* has no option sigmadata; accepted: sigma_data"):
        VideoPipeline(tiny_dit(), meta)


def test_a_plugin_subclass_forwarding_kwargs_lists_its_own_options_among_the_accepted():
    # a plugin's RectifiedFlow subclass with an option of its own forwards the rest to the built-in: a typo
    # reached the built-in's check, which listed only the built-in's options (not the subclass's `extra`)
    class WithExtra(vfm_models.get_formulation("rectified-flow")):
        def __init__(self, extra=1, **kwargs):
            super().__init__(**kwargs)
            self.extra = extra

    with pytest.raises(PluginOptionError) as info:
        WithExtra(extr=2)
    assert str(info.value).startswith("formulation WithExtra has no option extr; accepted: extra, ")
    assert WithExtra(extra=2).extra == 2
