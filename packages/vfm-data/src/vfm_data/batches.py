"""Model-ready batches: packed (THD) and stacked, and how to concatenate them across ranks."""

from __future__ import annotations

from typing import Sequence

import torch
from megatron.energon import Batch, Sample, edataclass


def pad_text(texts: Sequence[torch.Tensor], lengths: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """List of (L_i, D) -> (N, L_max, D) zero-padded and (N, L_max) bool mask (True = real token)."""
    l_max = max(int(t.shape[0]) for t in texts)
    out = texts[0].new_zeros((len(texts), l_max, texts[0].shape[1]))
    mask = torch.zeros(len(texts), l_max, dtype=torch.bool)
    for i, (t, n) in enumerate(zip(texts, lengths)):
        out[i, : t.shape[0]] = t
        mask[i, :n] = True
    return out, mask


@edataclass
class PackedSample(Sample):
    """Several samples concatenated into one sequence of at most ``max_seq_len`` patch tokens."""

    patches: torch.Tensor  # (N_tok, C*pt*p*p), real tokens only
    positions: torch.Tensor  # (N_tok, 3) long, (t, h, w) patch coordinate within its own sample
    seqlens: list  # tokens per sample
    grids: list  # (T', H', W') per sample
    texts: list  # (L_i, D) per sample
    text_lengths: list
    keys: list
    metas: list
    nbytes: int


@edataclass
class PackedBatch(Batch):
    """B packs, each padded to ``max_seq_len`` tokens (S). Flattened, the B*S tokens form the THD
    sequence that ``cu_seqlens`` cuts: one segment per sample, and one per pack's padding tail, so
    that attention never crosses a sample boundary. ``seq_ids`` is -1 on padding."""

    patches: torch.Tensor  # (B, S, C*pt*p*p)
    positions: torch.Tensor  # (B, S, 3) long
    seq_ids: torch.Tensor  # (B, S) long: index of the sample in this batch, -1 = padding
    cu_seqlens: torch.Tensor  # (segments + 1,) int32 over the flattened B*S tokens
    max_seqlen: int  # longest segment
    text: torch.Tensor  # (N, L, D) per sample, zero-padded
    text_mask: torch.Tensor  # (N, L) bool
    grids: list  # (T', H', W') per sample
    keys: list  # sample keys, in seq_ids order
    metas: list
    num_tokens: int  # real (non-pad) tokens
    nbytes: int  # bytes read from shards for this batch

    @classmethod
    def from_packs(cls, packs: Sequence[PackedSample], max_seq_len: int) -> "PackedBatch":
        b, dim = len(packs), packs[0].patches.shape[1]
        patches = packs[0].patches.new_zeros((b, max_seq_len, dim))
        positions = torch.zeros(b, max_seq_len, 3, dtype=torch.long)
        seq_ids = torch.full((b, max_seq_len), -1, dtype=torch.long)
        segments: list[int] = []
        sample = 0
        for i, p in enumerate(packs):
            n = p.patches.shape[0]
            patches[i, :n], positions[i, :n] = p.patches, p.positions
            start = 0
            for length in p.seqlens:
                seq_ids[i, start : start + length] = sample
                segments.append(length)
                start += length
                sample += 1
            if n < max_seq_len:
                segments.append(max_seq_len - n)
        cu = torch.zeros(len(segments) + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(torch.tensor(segments), 0)
        text, text_mask = pad_text([t for p in packs for t in p.texts], [n for p in packs for n in p.text_lengths])
        return cls(
            __key__=[k for p in packs for k in p.keys],
            __restore_key__=(),
            patches=patches,
            positions=positions,
            seq_ids=seq_ids,
            cu_seqlens=cu,
            max_seqlen=max(segments),
            text=text,
            text_mask=text_mask,
            grids=[g for p in packs for g in p.grids],
            keys=[k for p in packs for k in p.keys],
            metas=[m for p in packs for m in p.metas],
            num_tokens=sum(p.patches.shape[0] for p in packs),
            nbytes=sum(p.nbytes for p in packs),
        )


@edataclass
class VideoBatch(Batch):
    """Samples of one shape stacked (no packing); bucketing guarantees the shapes agree."""

    latents: torch.Tensor  # (B, C, T, H, W)
    text: torch.Tensor  # (B, L, D)
    text_mask: torch.Tensor  # (B, L) bool
    keys: list
    metas: list
    nbytes: int


def _pad_cat(tensors: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    """Concatenate along 0 after zero-padding ``dim`` to the largest size."""
    size = max(t.shape[dim] for t in tensors)
    padded = []
    for t in tensors:
        pad = [0, 0] * (t.ndim - dim - 1) + [0, size - t.shape[dim]]
        padded.append(torch.nn.functional.pad(t, pad))
    return torch.cat(padded, 0)


def concat_batches(batches: Sequence[PackedBatch | VideoBatch]) -> PackedBatch | VideoBatch:
    """One batch holding ``batches`` one after the other (the all-gather of a subset-loading group)."""
    first = batches[0]
    text = _pad_cat([b.text for b in batches], 1)
    text_mask = _pad_cat([b.text_mask for b in batches], 1)
    keys = [k for b in batches for k in b.keys]
    metas = [m for b in batches for m in b.metas]
    nbytes = sum(b.nbytes for b in batches)
    if isinstance(first, VideoBatch):
        return VideoBatch(
            __key__=keys, __restore_key__=(), latents=torch.cat([b.latents for b in batches]),
            text=text, text_mask=text_mask, keys=keys, metas=metas, nbytes=nbytes,
        )
    seq_ids, cu, offset_tokens, offset_samples = [], [torch.zeros(1, dtype=torch.int32)], 0, 0
    for b in batches:
        seq_ids.append(torch.where(b.seq_ids >= 0, b.seq_ids + offset_samples, b.seq_ids))
        cu.append(b.cu_seqlens[1:] + offset_tokens)
        offset_tokens += b.patches.shape[0] * b.patches.shape[1]
        offset_samples += len(b.keys)
    return PackedBatch(
        __key__=keys, __restore_key__=(),
        patches=torch.cat([b.patches for b in batches]),
        positions=torch.cat([b.positions for b in batches]),
        seq_ids=torch.cat(seq_ids),
        cu_seqlens=torch.cat(cu),
        max_seqlen=max(b.max_seqlen for b in batches),
        text=text, text_mask=text_mask,
        grids=[g for b in batches for g in b.grids], keys=keys, metas=metas,
        num_tokens=sum(b.num_tokens for b in batches), nbytes=nbytes,
    )
