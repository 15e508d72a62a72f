"""Blocks: patch embedding and its inverse, positions, AdaLN(-LoRA), QK-norm, MLPs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vfm_models.blocks.adaln import AdaLN, AdaLNShared, modulate
from vfm_models.blocks.attention_layers import SelfAttention
from vfm_models.blocks.context import BlockContext
from vfm_models.blocks.embedders import LabelEmbedder, TimestepEmbedder, timestep_embedding
from vfm_models.blocks.mlp import SwiGLU, ffn_dim, make_mlp
from vfm_models.blocks.patch import PatchEmbed3D, patchify, unpatchify
from vfm_models.blocks.position import apply_rope, grid_positions, rope_3d, sincos_3d


def test_unpatchify_inverts_patchify_for_videos_and_images():
    for shape, patch in [((2, 3, 4, 6, 8), (2, 2, 2)), ((1, 4, 1, 4, 6), (1, 2, 2))]:
        x = torch.randn(shape)
        tokens, grid = patchify(x, patch)
        assert tokens.shape == (shape[0], grid[0] * grid[1] * grid[2], shape[1] * patch[0] * patch[1] * patch[2])
        torch.testing.assert_close(unpatchify(tokens, grid, patch, shape[1]), x, rtol=0, atol=0)


def test_patch_embed_equals_strided_conv3d_in_t_major_order():
    torch.manual_seed(0)
    emb = PatchEmbed3D(3, 8, (2, 2, 2))
    x = torch.randn(2, 3, 4, 6, 8)
    # the same weights as a Conv3d: linear columns are ordered (pt, ph, pw, C)
    w = emb.proj.weight.view(8, 2, 2, 2, 3).permute(0, 4, 1, 2, 3)
    conv = F.conv3d(x, w, emb.proj.bias, stride=2)  # (B, D, T', H', W')
    tokens, grid = emb(x)
    assert grid == (2, 3, 4)
    torch.testing.assert_close(tokens, conv.flatten(2).transpose(1, 2), rtol=1e-5, atol=1e-5)


def test_patch_embed_rejects_indivisible_sizes_and_wrong_channels():
    emb = PatchEmbed3D(3, 8, (1, 2, 2))
    with pytest.raises(ValueError, match="not divisible by the patch"):
        emb(torch.randn(1, 3, 2, 5, 4))
    with pytest.raises(ValueError, match="takes 3"):
        emb(torch.randn(1, 4, 2, 4, 4))


def test_grid_positions_are_t_major():
    pos = grid_positions((2, 3, 4))
    idx = (pos[:, 0] * 3 + pos[:, 1]) * 4 + pos[:, 2]
    assert torch.equal(idx, torch.arange(24))


def test_rope_3d_scores_depend_only_on_the_offset_between_tokens():
    grid, dh = (3, 4, 5), 24
    cos, sin = rope_3d(grid, dh)
    pos = grid_positions(grid)
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, dh), torch.randn(1, 1, 1, dh)
    S = pos.shape[0]
    qr = apply_rope(q.expand(1, S, 1, dh), cos[None], sin[None])[0, :, 0]
    kr = apply_rope(k.expand(1, S, 1, dh), cos[None], sin[None])[0, :, 0]
    scores = qr @ kr.T  # (S, S)
    at = lambda where: grid_index(pos, where)  # noqa: E731
    # (0,1,0)->(1,0,2) and (1,2,1)->(2,1,3) have the same offset (1,-1,2); (0,0,0)->(1,3,2) does not
    torch.testing.assert_close(scores[at((1, 2, 1)), at((2, 1, 3))], scores[at((0, 1, 0)), at((1, 0, 2))])
    assert not torch.allclose(scores[at((0, 0, 0)), at((1, 3, 2))], scores[at((0, 1, 0)), at((1, 0, 2))])
    torch.testing.assert_close(qr.norm(dim=-1), q.norm().expand(S))  # rotations keep norms


def grid_index(pos, where):
    return [i for i in range(pos.shape[0]) if tuple(pos[i].tolist()) == where][0]


def test_sincos_3d_gives_every_token_a_distinct_embedding():
    emb = sincos_3d((3, 4, 5), 48)
    assert emb.shape == (60, 48)
    assert torch.cdist(emb, emb).add(torch.eye(60) * 10).min() > 1e-3


def test_timestep_embedding_matches_the_dit_formula_and_embedders_take_bad_input_badly():
    t = torch.tensor([0.0, 3.5])
    emb = timestep_embedding(t, 8)
    freqs = torch.exp(-torch.log(torch.tensor(10000.0)) * torch.arange(4) / 4)
    torch.testing.assert_close(emb[1], torch.cat([torch.cos(3.5 * freqs), torch.sin(3.5 * freqs)]))
    assert TimestepEmbedder(16)(t).shape == (2, 16)
    with pytest.raises(ValueError, match=r"\(B,\) noise levels"):
        TimestepEmbedder(16)(t[:, None])
    with pytest.raises(ValueError, match="integer"):
        LabelEmbedder(10, 16)(torch.tensor([0.5]))


def test_adaln_zero_starts_at_zero_and_lora_adds_the_shared_term():
    c = torch.randn(3, 16)
    full, lora = AdaLN(16, 6), AdaLN(16, 6, lora_rank=4)
    assert all(torch.count_nonzero(m) == 0 for m in full(c))
    shared = AdaLNShared(16, 6)
    torch.nn.init.normal_(shared.linear.weight)
    torch.nn.init.normal_(lora.up.weight)
    out = torch.cat(lora(c, shared(c)), dim=-1)
    expected = lora.up(lora.down(F.silu(c))) + shared.linear(F.silu(c))
    torch.testing.assert_close(out, expected)
    # the low-rank per-block term is much smaller than the full one
    n_full = sum(p.numel() for p in full.parameters())
    n_lora = sum(p.numel() for p in lora.parameters())
    assert n_lora < n_full / 3


def test_modulate_accepts_per_sample_and_per_token_vectors():
    x, shift, scale = torch.randn(2, 5, 4), torch.randn(2, 4), torch.randn(2, 4)
    per_tok = modulate(x, shift[:, None].expand(2, 5, 4), scale[:, None].expand(2, 5, 4))
    torch.testing.assert_close(modulate(x, shift, scale), per_tok)


def test_qk_rmsnorm_is_per_head_so_splitting_heads_gives_the_same_result():
    """Tensor parallelism shards q/k/v by heads; per-head QK-norm and shape-derived head counts make
    two half-width layers (heads 0-1 and 2-3) add up to the full layer."""
    torch.manual_seed(0)
    full = SelfAttention(32, 4, 4, 8, qk_norm=True)
    for norm in (full.q_norm, full.k_norm):
        torch.nn.init.normal_(norm.weight)
    x = torch.randn(2, 6, 32)
    ctx = BlockContext(c=torch.zeros(2, 32), rope=tuple(t[None] for t in rope_3d((1, 2, 3), 8)), grid=(1, 2, 3))
    expected = full(x, ctx)
    total = 0
    for half in (slice(0, 16), slice(16, 32)):
        part = SelfAttention(32, 2, 2, 8, qk_norm=True)
        with torch.no_grad():
            part.q_norm.weight.copy_(full.q_norm.weight)
            part.k_norm.weight.copy_(full.k_norm.weight)
            for name in ("q", "k", "v"):
                getattr(part, name).weight.copy_(getattr(full, name).weight[half])
                getattr(part, name).bias.copy_(getattr(full, name).bias[half])
            part.o.weight.copy_(full.o.weight[:, half])
            part.o.bias.copy_(full.o.bias / 2)
        total = total + part(x, ctx)
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-5)


def test_swiglu_is_silu_gate_times_up_and_widths_follow_llama():
    torch.manual_seed(0)
    mlp = SwiGLU(8, 12)
    x = torch.randn(3, 8)
    torch.testing.assert_close(mlp(x), mlp.w2(F.silu(mlp.w1(x)) * mlp.w3(x)))
    assert ffn_dim(4096, 4.0, "swiglu") == 10944  # 2/3 of 4D, rounded up to a multiple of 64
    assert ffn_dim(384, 4.0, "gelu") == 1536
    with pytest.raises(ValueError, match="gelu, swiglu"):
        make_mlp("relu", 8, 4.0)
