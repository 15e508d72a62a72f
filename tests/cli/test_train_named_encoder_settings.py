"""A config that names the shards' tokenizer or text encoder itself (``model.tokenizer = "pixel"``)
takes its options from the config, and the export records them for ``vfm generate``: options other
than those the shards were made with are refused, naming both; a config that leaves a setting at its
default where the shards' is the default too is accepted. (Naming ``pixel`` on the demo's patch-2
shards exported ``tokenizer_options = {}``, and generation failed decoding 12-channel latents.)"""

from __future__ import annotations

import pytest

from tests.cli.test_train_shards import TEXT_DIM, VIDEO, _write_bucket, shard_config
from vfm_cli import recipe
from vfm_parallel.trainer import ConfigError, from_dict


@pytest.fixture(scope="module")
def blend(tmp_path_factory):
    """Shards made with pixel patch 1 and the hash encoder of dim 16 (recorded in their metadata)."""
    from vfm_data import write_blend

    root = tmp_path_factory.mktemp("named")
    _write_bucket(root, "v", VIDEO, 4, seed=1)
    write_blend(root / "blend.yaml", [(root / "v", 4)])
    return root / "blend.yaml"


def _resolve(tmp_path, blend, **model):
    cfg = shard_config(tmp_path, blend)
    cfg["model"].update(model)
    return recipe.resolve(from_dict(cfg))


def test_a_named_tokenizer_with_other_settings_than_the_shards_is_refused_naming_both(tmp_path, blend):
    with pytest.raises(ConfigError) as info:
        _resolve(tmp_path, blend, tokenizer="pixel", tokenizer_options={"patch": 2})
    assert info.value.key == "model.tokenizer_options"
    assert "patch = 2, but the shards were made with the tokenizer 'pixel' and patch = 1" in str(info.value)
    assert 'model.tokenizer = ""' in str(info.value)


def test_a_named_text_encoder_left_at_its_default_width_is_refused_where_the_shards_used_another(tmp_path, blend):
    # hash's default dim is 64: the export's encoder would embed prompts 64 wide for a 16-wide model
    with pytest.raises(ConfigError) as info:
        _resolve(tmp_path, blend, text_encoder="hash")
    assert info.value.key == "model.text_encoder_options"
    assert f"dim = 64, but the shards were made with the text encoder 'hash' and dim = {TEXT_DIM}" in str(info.value)


def test_named_encoders_with_the_shards_settings_or_their_defaults_are_accepted(tmp_path, blend):
    resolved = _resolve(tmp_path, blend, tokenizer="pixel", tokenizer_options={},  # patch 1 is pixel's default
                        text_encoder="hash", text_encoder_options={"dim": TEXT_DIM})
    assert (resolved.tokenizer, resolved.tokenizer_options) == ("pixel", {})
    assert resolved.text_encoder_options == {"dim": TEXT_DIM}
