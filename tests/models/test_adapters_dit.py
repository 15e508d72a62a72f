"""DiT checkpoints into vfm's ``dit`` and back: diffusers' real ``DiTTransformer2DModel`` at a tiny size
with random weights (fp32 parity), the facebookresearch/DiT layout, DiT's 2-D position table, and
checkpoints of another family or size refused with the names that differ."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_models.adapters import AdapterConfigError, AdapterKeyError, check_keys, get_adapter, load_external
from vfm_models.adapters.io import save_diffusers_folder

diffusers = pytest.importorskip("diffusers")

TINY = dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
            sample_size=8, patch_size=2, num_embeds_ada_norm=10)


def _diffusers_dit(seed: int = 0, **overrides) -> "diffusers.DiTTransformer2DModel":
    """A random tiny diffusers DiT. Every parameter is drawn (adaLN-Zero's zeros would hide errors), and
    block 0's timestep/class embedder is copied into the others, as diffusers' own DiT converter does."""
    torch.manual_seed(seed)
    model = diffusers.DiTTransformer2DModel(**{**TINY, **overrides}).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
        shared = model.transformer_blocks[0].norm1.emb.state_dict()
        for block in model.transformer_blocks[1:]:
            block.norm1.emb.load_state_dict(shared)
    return model


def _vfm(options: dict, state: dict | None = None):
    family = vfm_models.get_family("dit")
    model = family.build(family.config(**{**options, "patch": tuple(options["patch"])})).eval()
    if state is not None:
        model.load_state_dict(state, strict=True)
    return model


def _inputs(batch: int = 3):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 4, 8, 8, generator=g)
    t = torch.tensor([0.0, 437.0, 999.0])[:batch]
    y = torch.tensor([0, 7, 10])[:batch]  # 10 = the null class (num_classes)
    return x, t, y


def _vfm_out(model, x, t, y):
    with torch.no_grad():
        return model(x[:, :, None], t, {"y": y})[:, :, 0]  # images are one-frame videos: (B, C, T=1, H, W)


def _diffusers_out(model, x, t, y):
    with torch.no_grad():
        return model(x, timestep=t, class_labels=y).sample


def test_diffusers_dit_converted_to_vfm_gives_the_same_output_in_fp32():
    ref_model = _diffusers_dit()
    adapter = get_adapter("diffusers-dit")
    options = adapter.options_from_external(dict(ref_model.config))
    assert options["out_channels"] == 8 and options["pos_embed"] == "sincos2d" and options["timestep_freq_shift"] == 1
    model = _vfm(options, adapter.from_external(ref_model.state_dict(), options))
    x, t, y = _inputs()
    ref = _diffusers_out(ref_model, x, t, y)
    out = _vfm_out(model, x, t, y)
    assert out.shape == ref.shape == (3, 8, 8, 8)
    assert float(ref.abs().max()) > 1.0  # a real signal, not adaLN-Zero's zeros
    assert float((out - ref).abs().max()) < 1e-5


def test_vfm_dit_converted_to_diffusers_loads_strictly_and_gives_the_same_output():
    adapter = get_adapter("diffusers-dit")
    options = adapter.options_from_external(dict(TINY))
    torch.manual_seed(3)
    model = _vfm(options)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    external = adapter.to_external(model.state_dict(), options)
    config = {**adapter.options_to_external(options), **adapter.external_from_meta({"latent_shape": [4, 1, 8, 8]})}
    ref_model = diffusers.DiTTransformer2DModel(**config).eval()
    ref_model.load_state_dict(external, strict=True)
    x, t, y = _inputs()
    assert float((_vfm_out(model, x, t, y) - _diffusers_out(ref_model, x, t, y)).abs().max()) < 1e-5


def test_a_diffusers_folder_round_trips_through_save_and_load_external(tmp_path):
    ref_model = _diffusers_dit(seed=5)
    ref_model.save_pretrained(tmp_path / "diffusers")  # diffusers' own writer: config.json + safetensors
    ckpt = load_external(tmp_path / "diffusers")  # adapter from _class_name
    assert ckpt.adapter.name == "diffusers-dit"
    options, state = ckpt.to_vfm()
    adapter = ckpt.adapter
    save_diffusers_folder(tmp_path / "back", adapter.to_external(state, options),
                          {**adapter.options_to_external(options), "sample_size": 8}, adapter.diffusers_class)
    again = diffusers.DiTTransformer2DModel.from_pretrained(tmp_path / "back").eval()
    for key, value in ref_model.state_dict().items():
        assert torch.equal(again.state_dict()[key], value), key
    x, t, y = _inputs()
    assert torch.equal(_diffusers_out(again, x, t, y), _diffusers_out(ref_model, x, t, y))


def test_a_legacy_transformer2dmodel_dit_config_is_read_as_diffusers_dit(tmp_path):
    """DiT pipelines saved before diffusers 0.28 name their transformer Transformer2DModel (diffusers maps
    an adaLN-Zero one with a patch size to DiTTransformer2DModel); one with text cross-attention is not DiT."""
    import json

    ref_model = _diffusers_dit(seed=4)
    ref_model.save_pretrained(tmp_path / "transformer")
    config_path = tmp_path / "transformer" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "_class_name": "Transformer2DModel", "cross_attention_dim": None}))
    (tmp_path / "model_index.json").write_text("{}")
    ckpt = load_external(tmp_path)  # a pipeline folder: its transformer/
    assert ckpt.adapter.name == "diffusers-dit" and ckpt.source == tmp_path / "transformer"
    options, state = ckpt.to_vfm()
    x, t, y = _inputs()
    assert float((_vfm_out(_vfm(options, state), x, t, y) - _diffusers_out(ref_model, x, t, y)).abs().max()) < 1e-5
    config_path.write_text(json.dumps({**config, "_class_name": "Transformer2DModel", "cross_attention_dim": 64}))
    with pytest.raises(AdapterConfigError, match="cross_attention_dim = 64"):
        load_external(tmp_path).to_vfm()
    config_path.write_text(json.dumps({**config, "_class_name": "Transformer2DModel", "norm_type": "layer_norm"}))
    with pytest.raises(AdapterConfigError, match="'Transformer2DModel' has no registered adapter"):
        load_external(tmp_path)


def test_dit_2d_position_table_equals_diffusers_get_2d_sincos_pos_embed():
    from diffusers.models.embeddings import get_2d_sincos_pos_embed

    from vfm_models.blocks.position import sincos_2d

    ours = sincos_2d((1, 6, 6), 64)
    theirs = get_2d_sincos_pos_embed(64, 6, base_size=6)  # DiT's table (the grid at its native size)
    assert ours.shape == theirs.shape == (36, 64)
    assert float((ours - theirs.float()).abs().max()) < 1e-6
    with pytest.raises(ValueError, match="one latent frame, got a grid of 2 frames"):
        sincos_2d((2, 6, 6), 64)


def test_diffusers_timestep_features_need_the_frequency_shift_and_dit_s_do_not():
    from diffusers.models.embeddings import get_timestep_embedding

    from vfm_models.blocks.embedders import timestep_embedding

    t = torch.tensor([0.0, 1.0, 250.0, 999.0])
    theirs = get_timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=1)  # diffusers' DiT
    assert float((timestep_embedding(t, 256, freq_shift=1) - theirs).abs().max()) < 1e-5
    assert float((timestep_embedding(t, 256) - theirs).abs().max()) > 0.1  # DiT's own (shift 0) differs
    dit = get_timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0)  # = facebookresearch/DiT
    assert float((timestep_embedding(t, 256) - dit).abs().max()) < 1e-5


def test_facebookresearch_layout_round_trips_and_its_fused_qkv_computes_the_same():
    """There are no DiT weights to download: the original layout is built from a diffusers model through
    the adapter's inverse; converting it back gives the same tensors, and its fused qkv (split on the way
    in) computes diffusers' output once the embedder difference (frequency shift) is set to diffusers'."""
    ref_model = _diffusers_dit(seed=7)
    diff_adapter, fb = get_adapter("diffusers-dit"), get_adapter("facebookresearch-dit")
    options = diff_adapter.options_from_external(dict(ref_model.config))
    vfm_state = diff_adapter.from_external(ref_model.state_dict(), options)
    original = fb.to_external(vfm_state, {**options, "input_size": 8})
    assert original["blocks.1.attn.qkv.weight"].shape == (96, 32) and original["pos_embed"].shape == (1, 16, 32)
    assert original["x_embedder.proj.weight"].shape == (32, 4, 2, 2)
    assert fb.matches(original) and not get_adapter("diffusers-dit").matches(original)
    config = fb.config_from_state_dict(original)
    assert config == {"input_size": 8, "patch_size": 2, "in_channels": 4, "hidden_size": 32, "depth": 2,
                      "num_classes": 10, "learn_sigma": True}
    fb_options = fb.options_from_external({**config, "num_heads": 2})
    assert fb_options.get("timestep_freq_shift", 0) == 0  # DiT's own timestep features
    assert fb.options_to_external({**fb_options, "input_size": 8}) == {**config, "num_heads": 2}
    plain = fb.options_to_external({**fb_options, "out_channels": 4, "input_size": 8})  # no learned sigma
    assert plain["learn_sigma"] is False
    back = fb.from_external(original, fb_options)
    assert back.keys() == vfm_state.keys()
    assert all(torch.equal(back[k], vfm_state[k]) for k in back)
    model = _vfm({**fb_options, "timestep_freq_shift": 1, "mlp_norm_eps": 1e-5}, back)
    x, t, y = _inputs()
    assert float((_vfm_out(model, x, t, y) - _diffusers_out(ref_model, x, t, y)).abs().max()) < 1e-5


def test_a_bare_facebookresearch_pt_file_loads_with_weights_only(tmp_path):
    ref_model = _diffusers_dit(seed=2)
    diff_adapter, fb = get_adapter("diffusers-dit"), get_adapter("facebookresearch-dit")
    options = diff_adapter.options_from_external(dict(ref_model.config))
    original = fb.to_external(diff_adapter.from_external(ref_model.state_dict(), options), {**options, "input_size": 8})
    torch.save({"model": original, "ema": original}, tmp_path / "0001000.pt")  # DiT's train.py checkpoint shape
    ckpt = load_external(tmp_path / "0001000.pt", config={"num_heads": 2})  # hidden 32 is none of DiT's sizes
    assert ckpt.adapter.name == "facebookresearch-dit"
    fb_options, state = ckpt.to_vfm()
    assert fb_options["hidden"] == 32 and fb_options["num_heads"] == 2 and fb_options["out_channels"] == 8
    with pytest.raises(AdapterConfigError, match="hidden_size 32 is none of DiT's sizes.*num_heads"):
        load_external(tmp_path / "0001000.pt").to_vfm()
    torch.save({"args": object()}, tmp_path / "pickled.pt")
    with pytest.raises(AdapterConfigError, match="weights_only=True"):
        load_external(tmp_path / "pickled.pt", "facebookresearch-dit")


def test_a_checkpoint_of_another_size_fails_with_the_names_that_differ():
    adapter = get_adapter("diffusers-dit")
    deeper = _diffusers_dit(num_layers=3)
    options = adapter.options_from_external(dict(TINY))  # says 2 layers
    with pytest.raises(AdapterKeyError, match=r"unexpected \(\d+\): transformer_blocks\.2\.attn1\.to_k\.bias"):
        adapter.from_external(deeper.state_dict(), options)
    wider = _diffusers_dit(attention_head_dim=24)
    with pytest.raises(AdapterKeyError, match=r"different shapes .*pos_embed\.proj\.weight: \(48, 4, 2, 2\) where \(32, 4, 2, 2\) is expected"):
        adapter.from_external(wider.state_dict(), options)


def test_a_checkpoint_of_another_family_fails_with_the_names_that_differ():
    adapter = get_adapter("diffusers-dit")
    options = adapter.options_from_external(dict(TINY))
    other = vfm_models.get_family("dit-cross").create("tiny").state_dict()  # a vfm state dict, not diffusers'
    with pytest.raises(AdapterKeyError) as info:
        adapter.from_external(other, options)
    message = str(info.value)
    assert "missing" in message and "pos_embed.proj.weight" in message
    assert "unexpected" in message and "blocks.0.cross_attn.q.weight" in message
    fb = get_adapter("facebookresearch-dit")
    with pytest.raises(AdapterKeyError, match="not a facebookresearch/DiT state dict: missing .*pos_embed"):
        fb.config_from_state_dict(other)


def test_per_block_embedders_that_differ_are_refused_by_name():
    adapter = get_adapter("diffusers-dit")
    model = diffusers.DiTTransformer2DModel(**TINY)  # diffusers' own init: each block draws its own embedder
    options = adapter.options_from_external(dict(model.config))
    with pytest.raises(AdapterConfigError, match=r"shares one timestep and class embedder.*transformer_blocks\.1\.norm1\.emb"):
        adapter.from_external(model.state_dict(), options)


def test_configs_the_other_side_cannot_express_are_refused_with_the_fields():
    adapter = get_adapter("diffusers-dit")
    with pytest.raises(AdapterConfigError, match=r"activation_fn = 'geglu' \(vfm's dit needs 'gelu-approximate'\)"):
        adapter.options_from_external({**TINY, "activation_fn": "geglu"})
    options = adapter.options_from_external(dict(TINY))
    with pytest.raises(AdapterConfigError, match=r"qk_norm = True \(needs False\).*pos_embed = 'rope'"):
        adapter.options_to_external({**options, "qk_norm": True, "pos_embed": "rope"})
    with pytest.raises(AdapterConfigError, match=r"timestep_freq_shift = 0 \(needs 1\)"):
        adapter.options_to_external({**options, "timestep_freq_shift": 0})


def test_check_keys_names_missing_unexpected_and_shapes():
    check_keys({"a": (2,), "b": torch.zeros(3)}, {"a": torch.zeros(2), "b": torch.zeros(3)}, "ok")
    with pytest.raises(AdapterKeyError, match=r"(?s)missing \(1\): b.*unexpected \(1\): c.*a: \(3,\) where \(2,\)"):
        check_keys({"a": (2,), "b": (3,)}, {"a": torch.zeros(3), "c": torch.zeros(1)}, "this checkpoint")


def test_unknown_adapter_lists_the_registered_ones():
    with pytest.raises(KeyError, match="unknown adapter 'nope'; available: .*diffusers-dit.*facebookresearch-dit"):
        get_adapter("nope")
