"""Every state-dict adapter refuses an external config key it does not understand (it may change what
the checkpoint computes), naming it and the accepted keys, and ignores its writer's metadata keys
(``_class_name``, ``_diffusers_version``, ``_name_or_path``...). The configs are the real ones that
diffusers writes for its own tiny random models (``save_pretrained``)."""

from __future__ import annotations

import json

import pytest

from vfm_models.adapters import AdapterConfigError, adapter_names, get_adapter
from vfm_models.adapters.exports import source_meta

diffusers = pytest.importorskip("diffusers")

DIT = dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2, sample_size=8,
           patch_size=2, num_embeds_ada_norm=10)
WAN = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
           text_dim=16, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=64)
#: What a hub download or another writer adds: pure metadata.
METADATA = {"_name_or_path": "/models/some-model", "_commit_hash": "0123abcd", "_use_default_values": ["dropout"]}


def _saved_config(model, folder) -> dict:
    model.save_pretrained(folder)  # diffusers' own writer: _class_name, _diffusers_version, every field
    return json.loads((folder / "config.json").read_text())


def _configs(tmp_path) -> dict[str, dict]:
    """A real external config per registered adapter."""
    dit = _saved_config(diffusers.DiTTransformer2DModel(**DIT), tmp_path / "dit")
    wan = _saved_config(diffusers.WanTransformer3DModel(**WAN), tmp_path / "wan")
    # facebookresearch/DiT has no library to save it: its config is what the adapter reads from its weights
    vfm = get_adapter("diffusers-dit").options_from_external(dit)
    import vfm_models

    family = vfm_models.get_family("dit")
    state = family.build(family.config(**{**vfm, "patch": tuple(vfm["patch"])})).state_dict()
    fb = get_adapter("facebookresearch-dit")
    weights = fb.to_external(state, {**vfm, "input_size": 8})
    return {"diffusers-dit": dit, "diffusers-wan": wan,
            "facebookresearch-dit": {**fb.config_from_state_dict(weights), "num_heads": 2}}


def test_every_adapter_refuses_an_unknown_config_key_naming_it_and_ignores_metadata(tmp_path):
    configs = _configs(tmp_path)
    assert sorted(configs) == adapter_names()  # a new adapter gets a real config here too
    for name, config in configs.items():
        adapter = get_adapter(name)
        assert config.keys() - {"_class_name", "_diffusers_version"}  # the real fields are there
        options = adapter.options_from_external(config)  # as written, metadata keys and all
        assert adapter.options_from_external({**config, **METADATA}) == options
        # qk-norm over a DiT, a rotary base over a Wan: a key the adapter does not know changes the maths
        with pytest.raises(AdapterConfigError) as caught:
            adapter.options_from_external({**config, "qk_norm_eps": 1e-3, "rope_theta": 500.0})
        text = str(caught.value)
        assert "unknown" in text and "config key(s) qk_norm_eps, rope_theta; accepted: " in text, (name, text)
        assert "metadata keys starting with '_'" in text


def test_a_diffusers_dit_folder_with_an_unknown_key_is_refused_before_any_weight_is_read(tmp_path):
    config = _saved_config(diffusers.DiTTransformer2DModel(**DIT), tmp_path / "dit")
    assert source_meta(tmp_path / "dit")["config"]["num_heads"] == 2
    (tmp_path / "dit" / "config.json").write_text(json.dumps({**config, "num_kv_heads": 1}))  # GQA: same q, other k/v
    with pytest.raises(AdapterConfigError, match=r"unknown DiTTransformer2DModel config key\(s\) num_kv_heads; "
                                                 r"accepted: .*attention_head_dim, .*num_attention_heads"):
        source_meta(tmp_path / "dit")


def test_a_real_legacy_transformer2dmodel_config_is_read_and_a_non_dit_field_value_is_refused(tmp_path):
    legacy = diffusers.Transformer2DModel(**DIT, norm_type="ada_norm_zero", activation_fn="gelu-approximate",
                                          attention_bias=True, norm_elementwise_affine=False)
    config = _saved_config(legacy, tmp_path / "legacy")  # every Transformer2DModel field, at a DiT's values
    assert config["_class_name"] == "Transformer2DModel" and "only_cross_attention" in config
    adapter = get_adapter("diffusers-dit")
    assert adapter.options_from_external(config) == adapter.options_from_external(
        _saved_config(diffusers.DiTTransformer2DModel(**DIT), tmp_path / "dit"))
    with pytest.raises(AdapterConfigError, match=r"only_cross_attention = True \(a legacy Transformer2DModel DiT has False"):
        adapter.options_from_external({**config, "only_cross_attention": True})


def test_facebookresearch_dit_constructor_arguments_are_read_or_refused(tmp_path):
    fb = get_adapter("facebookresearch-dit")
    config = _configs(tmp_path)["facebookresearch-dit"]
    assert fb.meta_from_external({**config, "class_dropout_prob": 0.2})["cond_dropout"] == 0.2  # its label dropout
    assert fb.meta_from_external(config)["cond_dropout"] == 0.1  # DiT's default
    with pytest.raises(AdapterConfigError, match="mlp_ratio = 6.0: vfm's dit conversion reads DiT's 4.0"):
        fb.options_from_external({**config, "mlp_ratio": 6.0})  # another MLP width
    with pytest.raises(AdapterConfigError, match="class_dropout_prob = 0.0: vfm's dit needs DiT's null class"):
        fb.options_from_external({**config, "class_dropout_prob": 0.0})  # no null-class row in the label table
