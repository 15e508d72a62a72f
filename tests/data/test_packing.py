import pytest
import torch
import torch.nn.functional as F

from vfm_data import make_loader
from vfm_data.packing import crop_to_tokens, patch_grid, patchify, select_packs


def _block_diagonal_mask(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    seg = torch.zeros(total, dtype=torch.long)
    for i in range(len(cu_seqlens) - 1):
        seg[cu_seqlens[i] : cu_seqlens[i + 1]] = i
    return seg[:, None] == seg[None, :]


def test_attention_over_a_packed_batch_equals_attention_over_each_sample_alone(small_dataset):
    torch.manual_seed(0)
    loader = make_loader(small_dataset, patch_size=2, batch_size=2, max_seq_len=24, packing_buffer=16)
    batch = next(loader)
    b, s, dim = batch.patches.shape
    heads, hd = 2, 8
    proj = torch.randn(3, dim, heads * hd)
    x = batch.patches.reshape(1, b * s, dim)  # THD: packs flattened into one sequence
    q, k, v = (torch.einsum("bsd,de->bse", x, w).view(1, b * s, heads, hd).transpose(1, 2) for w in proj)
    mask = _block_diagonal_mask(batch.cu_seqlens, b * s)
    packed = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    seq_ids = batch.seq_ids.reshape(-1)
    assert len(batch.keys) > b  # several samples share a pack
    for i in range(len(batch.keys)):
        idx = (seq_ids == i).nonzero().squeeze(1)
        alone = F.scaled_dot_product_attention(q[:, :, idx], k[:, :, idx], v[:, :, idx])
        torch.testing.assert_close(packed[:, :, idx], alone, rtol=1e-5, atol=1e-5)
    # cu_seqlens segments are the samples and the padding tails, and cover every token
    assert batch.cu_seqlens[-1] == b * s
    assert batch.num_tokens == int((seq_ids >= 0).sum())


def test_packed_tokens_are_the_patchified_latents_with_their_grid_positions():
    latent = torch.randn(4, 3, 4, 6)
    tokens = patchify(latent, 2)
    assert patch_grid(latent.shape, 2) == (3, 2, 3) and tokens.shape == (18, 16)
    conv = torch.nn.Conv3d(4, 5, kernel_size=(1, 2, 2), stride=(1, 2, 2), bias=False)
    ref = conv(latent[None])[0].flatten(1).T  # (T'*H'*W', 5) t-major
    torch.testing.assert_close(tokens @ conv.weight.flatten(1).T, ref, rtol=1e-5, atol=1e-5)


def test_best_fit_packing_places_every_sample_within_capacity():
    lengths = [256] * 30 + [1000, 3000, 8000, 4096, 5000, 2000, 7000, 1200] * 5
    packs = select_packs(lengths, 8192)
    assert sorted(i for p in packs for i in p) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in p) <= 8192 for p in packs)
    with pytest.raises(ValueError, match="exceeds the pack capacity"):
        select_packs([9000], 8192)


def test_overlong_samples_are_dropped_with_a_count_or_cropped(small_dataset):
    # videos of 3-4 frames are 12-16 tokens at patch 2 > max_seq_len 10; images (4) and 2-frame videos (8) fit
    with pytest.warns(UserWarning, match="dropped sample"):
        drop = make_loader(small_dataset, patch_size=2, batch_size=1, max_seq_len=10, packing_buffer=8, overlong="drop")
        batches = [next(drop) for _ in range(4)]
    assert drop.counts["overlong_drop"] > 0
    assert all(n <= 10 for b in batches for n in (b.cu_seqlens[1:] - b.cu_seqlens[:-1]).tolist())
    crop = make_loader(small_dataset, patch_size=2, batch_size=1, max_seq_len=10, packing_buffer=8, overlong="crop")
    batches = [next(crop) for _ in range(4)]
    assert crop.counts["overlong_crop"] > 0 and crop.counts["overlong_drop"] == 0
    assert all(g[0] * g[1] * g[2] <= 10 for b in batches for g in b.grids)
    assert crop_to_tokens(torch.randn(4, 5, 8, 8), 10, 2).shape == (4, 1, 4, 8)  # one frame of 16 > 10 tokens: keep 2 of 4 rows
