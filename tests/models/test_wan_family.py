"""The ``wan`` family against diffusers' ``WanTransformer3DModel`` (random weights, fp32), the
``diffusers-wan`` adapter both ways, its refusals, the published 1.3B/14B shapes, and the family
properties every vfm family has (forward = embed/context/blocks/head, packed = each sample alone)."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_models.adapters.base import AdapterConfigError, AdapterKeyError
from vfm_models.adapters.wan import DIFFUSERS_WAN

diffusers = pytest.importorskip("diffusers")
from diffusers import WanTransformer3DModel  # noqa: E402

TINY = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
            text_dim=16, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=64)

#: The published Wan 2.1 text-to-video transformer configs (Wan-AI/Wan2.1-T2V-{1.3B,14B}-Diffusers,
#: transformer/config.json; the same numbers as Wan2.1's wan/configs/wan_t2v_{1_3B,14B}.py).
PUBLISHED = {
    "1.3B": dict(_class_name="WanTransformer3DModel", added_kv_proj_dim=None, attention_head_dim=128,
                 cross_attn_norm=True, eps=1e-06, ffn_dim=8960, freq_dim=256, image_dim=None, in_channels=16,
                 num_attention_heads=12, num_layers=30, out_channels=16, patch_size=[1, 2, 2],
                 qk_norm="rms_norm_across_heads", rope_max_seq_len=1024, text_dim=4096),
    "14B": dict(_class_name="WanTransformer3DModel", added_kv_proj_dim=None, attention_head_dim=128,
                cross_attn_norm=True, eps=1e-06, ffn_dim=13824, freq_dim=256, image_dim=None, in_channels=16,
                num_attention_heads=40, num_layers=40, out_channels=16, patch_size=[1, 2, 2],
                qk_norm="rms_norm_across_heads", rope_max_seq_len=1024, text_dim=4096),
}


def random_diffusers(seed=0, **overrides) -> WanTransformer3DModel:
    """A tiny WanTransformer3DModel whose every parameter is random (no zero or identity layers)."""
    torch.manual_seed(seed)
    model = WanTransformer3DModel(**{**TINY, **overrides}).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return model


def inputs(batch=2, channels=4, frames=3, height=6, width=8, text_len=7, text_dim=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, frames, height, width, generator=g)
    t = torch.rand(batch, generator=g)
    text = torch.randn(batch, text_len, text_dim, generator=g)
    return x, t, text


def converted(ref: WanTransformer3DModel):
    options = DIFFUSERS_WAN.options_from_external(dict(ref.config))
    model = vfm_models.get_family("wan").create(**options).eval()
    model.load_state_dict(DIFFUSERS_WAN.from_external(ref.state_dict(), options), strict=True)
    return model, options


@pytest.mark.parametrize("patch", [(1, 2, 2), (2, 2, 2)])
def test_forward_equals_diffusers_wan_with_converted_random_weights(patch):
    ref = random_diffusers(patch_size=patch)
    model, _ = converted(ref)
    x, t, text = inputs(frames=4)
    with torch.no_grad():
        ours = model(x, t, {"text": text})
        theirs = ref(x, t * 1000, text, return_dict=False)[0]  # vfm's s in [0, 1] is Wan's timestep / 1000
    assert theirs.abs().max() > 1  # the comparison carries signal
    assert (ours - theirs).abs().max().item() < 1e-4


def test_vfm_state_dict_converts_back_loads_strictly_into_diffusers_and_matches():
    torch.manual_seed(3)
    model = vfm_models.get_family("wan").create("tiny").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    options = {"in_channels": 4, "hidden": 48, "depth": 2, "num_heads": 2, "ffn_dim": 64, "text_dim": 16, "freq_dim": 32}
    ref = WanTransformer3DModel(**DIFFUSERS_WAN.options_to_external(options)).eval()
    ref.load_state_dict(DIFFUSERS_WAN.to_external(model.state_dict(), options), strict=True)
    x, t, text = inputs()
    with torch.no_grad():
        diff = (model(x, t, {"text": text}) - ref(x, t * 1000, text, return_dict=False)[0]).abs().max().item()
    assert diff < 1e-4
    # and back again: the same tensors
    again = DIFFUSERS_WAN.from_external(ref.state_dict(), options)
    assert all(torch.equal(again[k], v) for k, v in model.state_dict().items())


def test_checkpoint_of_another_size_or_family_fails_naming_the_keys_that_differ():
    options = DIFFUSERS_WAN.options_from_external(dict(random_diffusers().config))
    deeper = random_diffusers(num_layers=3).state_dict()
    with pytest.raises(AdapterKeyError, match=r"unexpected \(\d+\): blocks\.2\.attn1\.norm_k\.weight"):
        DIFFUSERS_WAN.from_external(deeper, options)
    wider = random_diffusers(ffn_dim=96).state_dict()
    with pytest.raises(AdapterKeyError, match=r"blocks\.0\.ffn\.net\.0\.proj\.weight: \(96, 48\) where \(64, 48\)"):
        DIFFUSERS_WAN.from_external(wider, options)
    from diffusers import DiTTransformer2DModel

    dit = DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=1,
                                sample_size=8, num_embeds_ada_norm=10).state_dict()
    with pytest.raises(AdapterKeyError, match=r"missing \(\d+\): blocks\.0\.attn1\.norm_k\.weight(.|\n)*unexpected"):
        DIFFUSERS_WAN.from_external(dit, options)
    model = vfm_models.get_family("wan").create("tiny")
    with pytest.raises(AdapterKeyError, match="blocks.1.adaln.table"):
        DIFFUSERS_WAN.to_external(model.state_dict(), {**options, "depth": 1})


def test_configs_either_side_cannot_express_are_refused_by_name():
    with pytest.raises(AdapterConfigError, match="image_dim.*1280"):
        DIFFUSERS_WAN.options_from_external({**PUBLISHED["14B"], "image_dim": 1280, "added_kv_proj_dim": 5120})
    with pytest.raises(AdapterConfigError, match="window_size"):
        DIFFUSERS_WAN.options_from_external({**PUBLISHED["1.3B"], "window_size": [-1, -1]})
    with pytest.raises(AdapterConfigError, match="'use_text_mask': True"):  # diffusers' Wan attends to padding
        DIFFUSERS_WAN.options_to_external({**DIFFUSERS_WAN.options_from_external(PUBLISHED["1.3B"]), "use_text_mask": True})


@pytest.mark.parametrize("preset", ["1.3B", "14B"])
def test_presets_are_the_published_configs_and_have_diffusers_parameter_count(preset):
    family = vfm_models.get_family("wan")
    options = DIFFUSERS_WAN.options_from_external(PUBLISHED[preset])
    assert family.config(preset) == family.config(**options)
    with torch.device("meta"):
        ours = sum(p.numel() for p in family.create(preset).parameters())
        theirs = sum(p.numel() for p in WanTransformer3DModel(**{k: v for k, v in PUBLISHED[preset].items()
                                                                 if not k.startswith("_")}).parameters())
    assert ours == theirs
    assert {"1.3B": 1.2e9, "14B": 14e9}[preset] < ours < {"1.3B": 1.5e9, "14B": 14.5e9}[preset]


def test_rope_is_wans_t_h_w_split_of_the_head_dim():
    """Wan gives h and w 2*(Dh//6) dims each and t the rest: with Dh=128, 44/42/42 (22/21/21 pairs)."""
    from vfm_models.blocks.position import rope_3d

    ref = WanTransformer3DModel(**{**TINY, "attention_head_dim": 128, "num_attention_heads": 1}).rope
    cos, sin = ref(torch.zeros(1, 4, 3, 10, 6))  # (1, S, 1, Dh), each angle twice
    ours_cos, ours_sin = rope_3d((3, 5, 3), 128)  # (S, Dh/2)
    assert (cos[0, :, 0, ::2] - ours_cos).abs().max() < 1e-6 and (sin[0, :, 0, ::2] - ours_sin).abs().max() < 1e-6


def test_text_mask_is_ignored_unless_asked_for():
    """Wan attends to its zero-padded captions; ``use_text_mask=True`` masks the padding instead."""
    x, t, text = inputs()
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 4:] = False
    for use in (False, True):
        torch.manual_seed(0)
        model = vfm_models.get_family("wan").create("tiny", use_text_mask=use)
        with torch.no_grad():
            model.final_layer.linear.weight.normal_()
            masked, plain = model(x, t, {"text": text, "text_mask": mask}), model(x, t, {"text": text})
        assert torch.equal(masked[0], plain[0])
        assert torch.equal(masked[1], plain[1]) != use


def test_forward_is_embed_context_blocks_head_and_packed_equals_each_sample_alone():
    from tests.models.test_families import (
        test_forward_is_exactly_embed_context_blocks_head,
        test_parallel_plan_names_modules_that_exist_with_the_stated_kinds,
    )

    test_forward_is_exactly_embed_context_blocks_head("wan")
    test_parallel_plan_names_modules_that_exist_with_the_stated_kinds("wan")
    torch.manual_seed(0)
    model = vfm_models.get_family("wan").create("tiny", use_text_mask=True)
    with torch.no_grad():
        model.final_layer.linear.weight.normal_()
    g = torch.Generator().manual_seed(0)
    latents = [torch.randn(4, 2, 4, 4, generator=g), torch.randn(4, 1, 6, 4, generator=g)]
    t = torch.rand(2, generator=g)
    text = torch.randn(2, 5, 16, generator=g)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    packed = model.forward_packed(latents, t, {"text": text, "text_mask": mask})
    for i, x in enumerate(latents):
        alone = model(x[None], t[i : i + 1], {"text": text[i : i + 1, mask[i]]})
        torch.testing.assert_close(packed[i], alone[0], rtol=1e-4, atol=1e-5)


def test_wan_fixed_options_are_refused_with_what_wan_uses():
    family = vfm_models.get_family("wan")
    with pytest.raises(ValueError, match="mlp='gelu'"):
        family.config("tiny", mlp="swiglu")
    with pytest.raises(ValueError, match="out_channels must equal in_channels"):
        family.config("tiny", out_channels=8)


def test_diffusers_folder_converts_to_a_vfm_export_and_back_with_the_same_weights(tmp_path):

    from vfm_models.adapters.exports import convert_to_export, export_to_external
    from vfm_models.export import load_export, read_meta

    ref = random_diffusers(seed=5)
    ref.save_pretrained(tmp_path / "hub")
    convert_to_export(tmp_path / "hub", tmp_path / "export")  # the adapter found by _class_name
    meta = read_meta(tmp_path / "export")
    assert (meta["family"], meta["formulation"], meta["converted_from"]) == ("wan", "rectified-flow", {"adapter": "diffusers-wan"})
    assert meta["null_condition"] == {"kind": "text", "caption": ""} and meta["latent_shape"] == [4, 21, 60, 104]
    model, _ = load_export(tmp_path / "export")
    x, t, text = inputs()
    with torch.no_grad():
        assert (model(x, t, {"text": text}) - ref(x, t * 1000, text, return_dict=False)[0]).abs().max() < 1e-4
    export_to_external(tmp_path / "export", tmp_path / "back")
    back = WanTransformer3DModel.from_pretrained(tmp_path / "back")
    assert dict(back.config)["num_layers"] == 2
    for key, value in ref.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
