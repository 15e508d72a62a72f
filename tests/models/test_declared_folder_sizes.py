"""The ``sd-vae`` and ``wan-vae`` tokenizers and the ``t5`` text encoder declare their latent channels /
embedding width unbuilt, from their folder's config.json (no weights read): an export naming one whose size
is not the model's is refused when it is written, not when it generates. Real folders saved by diffusers
and transformers."""

from __future__ import annotations

import pytest

import vfm_models
from vfm_models.export_generation import generation_problems

pytest.importorskip("diffusers")


def _sd_vae(folder):
    from tests.models.test_sd_vae_tokenizer import make_vae_folder

    make_vae_folder(folder / "vae")  # a pipeline folder: the VAE in its vae/
    return "tokenizers", "sd-vae", folder, "declared_latent_channels", "latent_channels"


def _wan_vae(folder):
    from tests.models.test_wan_vae_and_umt5 import make_vae_folder

    make_vae_folder(folder)
    return "tokenizers", "wan-vae", folder, "declared_latent_channels", "latent_channels"


def _t5(folder):
    from tests.models.test_text_encoders import make_t5_folder

    make_t5_folder(folder, "umt5")
    return "text_encoders", "t5", folder, "declared_width", "dim"


@pytest.mark.parametrize("make", [_sd_vae, _wan_vae, _t5], ids=["sd-vae", "wan-vae", "t5"])
def test_the_size_declared_from_the_folders_config_is_the_built_components(tmp_path, make):
    kind, name, folder, declare, attribute = make(tmp_path / "component")
    factory = vfm_models.host.get(kind, name)
    built = vfm_models.host.build(kind, name, {"path": str(folder)})
    assert getattr(factory, declare)({"path": str(folder)}) == getattr(built, attribute)


@pytest.mark.parametrize("make", [_sd_vae, _wan_vae, _t5], ids=["sd-vae", "wan-vae", "t5"])
def test_a_folder_without_a_readable_config_declares_nothing(tmp_path, make):
    kind, name, _, declare, _ = make(tmp_path / "component")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "config.json").write_text("[" * 100_000 + "]" * 100_000)  # past json's recursion
    factory = vfm_models.host.get(kind, name)
    for path in (tmp_path / "missing", tmp_path / "bad", tmp_path / "deep"):  # checked when built, as before
        assert getattr(factory, declare)({"path": str(path)}) is None


def test_an_export_whose_vae_gives_other_channels_than_the_model_takes_is_refused_unbuilt(tmp_path):
    _, _, folder, _, _ = _wan_vae(tmp_path / "vae")  # z_dim 4
    model = vfm_models.get_family("dit").create("tiny", in_channels=3)
    meta = {"family": "dit", "config": model.config, "tokenizer": "wan-vae", "tokenizer_options": {"path": str(folder)}}
    problems = generation_problems(meta, model.config, for_generation=False)
    assert any("gives 4 latent channels but the model takes 3" in p for p in problems), problems


def test_an_export_whose_t5_width_is_not_the_models_text_dim_is_refused_unbuilt(tmp_path):
    _, _, folder, _, _ = _t5(tmp_path / "t5")  # d_model 16
    config = vfm_models.get_family("dit-cross").create("tiny", text_dim=32).config
    meta = {"family": "dit-cross", "config": config, "text_encoder": "t5", "text_encoder_options": {"path": str(folder)}}
    problems = generation_problems(meta, config, for_generation=False)
    assert any("gives 16-wide embeddings but the model's text_dim is 32" in p for p in problems), problems


def test_t5_declares_the_width_transformers_builds_when_its_config_gives_hidden_size_beside_d_model(tmp_path):
    import json

    _, _, folder, _, _ = _t5(tmp_path / "t5")  # d_model 16
    config = json.loads((folder / "config.json").read_text())
    # hidden_size is T5's alias of d_model: transformers sets it after d_model, so it is the width built
    (folder / "config.json").write_text(json.dumps({**config, "d_model": 99, "hidden_size": 16}))
    built = vfm_models.host.build("text_encoders", "t5", {"path": str(folder)})
    assert built.dim == 16
    assert vfm_models.host.get("text_encoders", "t5").declared_width({"path": str(folder)}) == 16
