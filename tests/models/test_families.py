"""Model families: presets, shapes, the model-parts contract, packed batches, parallel plans, overfitting."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_models.blocks.attention import AttentionCore
from vfm_models.families import ModelFamily
from vfm_models.flops import count_params

from .test_families_support import FAMILIES, cond_for, tiny, unmodulated


def test_every_family_is_registered_by_name_with_a_parallelization_description():
    assert set(FAMILIES) <= set(vfm_models.host.names("families"))
    for name in FAMILIES:
        family = vfm_models.get_family(name)
        assert isinstance(family, ModelFamily) and family.name == name
        assert "TP:" in family.description and "Attention:" in family.description


@pytest.mark.parametrize("name", FAMILIES)
def test_every_preset_builds_on_the_meta_device(name):
    family = vfm_models.get_family(name)
    with torch.device("meta"):
        for preset in family.presets:
            model = family.create(preset)
            assert model.parallel_plan().num_layers == len(model.blocks)


@pytest.mark.parametrize("preset, billions", [("7B", 7.0), ("28B", 28.0)])
def test_large_dit_cross_presets_have_their_named_parameter_counts(preset, billions):
    with torch.device("meta"):
        model = vfm_models.get_family("dit-cross").create(preset)
    assert abs(count_params(model) / 1e9 / billions - 1) < 0.05


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("shape", [(2, 1, 4, 6), (2, 3, 4, 4)], ids=["image", "video"])
def test_forward_returns_the_latent_shape_for_images_and_videos(name, shape):
    model = tiny(name)
    B, T, H, W = shape
    x = torch.randn(B, model.config.in_channels, T, H, W)
    out = model(x, torch.rand(B), cond_for(model, B))
    assert out.shape == x.shape


@pytest.mark.parametrize("name", FAMILIES)
def test_forward_is_exactly_embed_context_blocks_head(name):
    model = unmodulated(tiny(name))
    x, t = torch.randn(2, model.config.in_channels, 2, 4, 4), torch.rand(2)
    cond = cond_for(model, 2)
    tokens, grid = model.embed(x)
    assert grid == (2, 2, 2) and tokens.shape == (2, 8, model.config.hidden)
    ctx = model.context(grid, t, cond)
    for block in model.blocks:
        tokens = block(tokens, ctx)
    torch.testing.assert_close(model.head(tokens, ctx), model(x, t, cond), rtol=0, atol=0)


def test_map_tokens_transforms_every_per_token_field():
    model = tiny("dit-cross", adaln_lora_rank=4)
    tokens, grids, cu = model.embed_packed([torch.randn(4, 2, 4, 4), torch.randn(4, 1, 2, 4)])
    cond = cond_for(model, 2)
    ctx = model.context_packed(grids, cu, torch.rand(2), cond)
    S = tokens.shape[1]
    half = ctx.map_tokens(lambda t, dim: t.narrow(dim, 0, S // 2))
    assert half.token_sample.shape[1] == half.rope[0].shape[1] == half.rope[1].shape[1] == S // 2
    # conditioning stays one row per sample: blocks gather it per token through token_sample
    assert half.c is ctx.c and half.mod is ctx.mod
    assert half.text is ctx.text and half.grid == ctx.grid


@pytest.mark.parametrize("name", FAMILIES)
def test_packed_forward_and_backward_equal_each_sample_alone(name):
    # wan attends to its padded caption tokens by default (as Wan does); stripping them below is
    # the same caption only under its text mask
    options = {"stdit": {"full_attention_blocks": (1,)}, "wan": {"use_text_mask": True}}.get(name, {})
    model = unmodulated(tiny(name, **options))
    C = model.config.in_channels
    g = torch.Generator().manual_seed(0)
    latents = [torch.randn(C, 2, 4, 4, generator=g), torch.randn(C, 1, 6, 4, generator=g), torch.randn(C, 3, 2, 2, generator=g)]
    t = torch.rand(3, generator=g)
    cond = cond_for(model, 3, generator=g)
    packed = model.forward_packed(latents, t, cond)
    sum(o.square().sum() for o in packed).backward()
    packed_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    for i, x in enumerate(latents):
        one = {k: v[i : i + 1] for k, v in cond.items()}
        if "text_mask" in one:  # alone, a sample's caption is just its real tokens
            keep = one["text_mask"][0]
            one = {"text": one["text"][:, keep], "text_mask": one["text_mask"][:, keep]}
        alone = model(x[None], t[i : i + 1], one)
        torch.testing.assert_close(packed[i], alone[0], rtol=1e-4, atol=1e-5)
        alone.square().sum().backward()
    assert len(packed_grads) == sum(1 for p in model.parameters() if p.grad is not None) > 10
    for n, p in model.named_parameters():
        torch.testing.assert_close(packed_grads[n], p.grad, rtol=1e-4, atol=1e-5, msg=n)


@pytest.mark.parametrize("name", FAMILIES)
def test_parallel_plan_names_modules_that_exist_with_the_stated_kinds(name):
    model = tiny(name, depth=3, **({"full_attention_blocks": (2,)} if name == "stdit" else {}))
    plan = model.parallel_plan()
    blocks = model.get_submodule(plan.blocks)
    for i, block in enumerate(blocks):
        for path in plan.tp:
            assert isinstance(block.get_submodule(path), torch.nn.Linear)
        kinds = plan.attention_for(i)
        cores = {n: m.kind for n, m in block.named_modules() if isinstance(m, AttentionCore)}
        assert cores == kinds
    for path in plan.conditioning + plan.pre_blocks + plan.post_blocks:
        model.get_submodule(path)
    if name == "stdit":
        assert plan.attention_for(2)["spatial_attn.core"] == "full"
        assert plan.attention_for(0)["spatial_attn.core"] == "spatial"


def test_adaln_lora_adds_a_shared_conditioning_embedder_and_shrinks_the_model():
    full, lora = tiny("dit-cross", hidden=64), tiny("dit-cross", hidden=64, adaln_lora_rank=4)
    assert "adaln_shared" in lora.parallel_plan().conditioning
    assert count_params(lora) < count_params(full)


def test_bad_conditioning_and_config_errors_say_what_is_accepted():
    model = tiny("dit-cross")
    x, t = torch.randn(1, 4, 1, 4, 4), torch.rand(1)
    with pytest.raises(ValueError, match=r"\(B, L, 16\)"):
        model(x, t, {})
    with pytest.raises(ValueError, match="class labels"):
        tiny("dit")(x, t, {})
    with pytest.raises(KeyError, match="presets: .*tiny"):
        vfm_models.get_family("dit").config("XXL")
    with pytest.raises(ValueError, match="divisible by num_heads"):
        vfm_models.get_family("dit").config("tiny", hidden=30, num_heads=4)
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        vfm_models.get_family("moviegen").config("tiny", num_kv_heads=3)
    with pytest.raises(ValueError, match="outside"):
        vfm_models.get_family("stdit").config("tiny", full_attention_blocks=(5,))


@pytest.mark.parametrize("name", FAMILIES)
def test_tiny_model_overfits_one_batch(name):
    """Plain MSE denoising (predict x0 from a fixed noisy x0): the loss falls at least 10x."""
    model = tiny(name, hidden=64, num_heads=4)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(2, model.config.in_channels, 2, 4, 4, generator=g)
    noisy = x0 + 0.5 * torch.randn(x0.shape, generator=g)
    t = torch.tensor([0.3, 0.7])
    cond = cond_for(model, 2, generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(200):
        loss = (model(noisy, t, cond) - x0).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])
