"""Attention backends behind one call: torch SDPA (reference), flash-attn and TransformerEngine.

``attend`` computes softmax(Q K^T / sqrt(Dh)) V for (B, H, S, Dh) tensors, dense or packed (THD,
``cu_seqlens``). GPU libraries are imported lazily and only chosen on CUDA with half precision; on
CPU (and as the reference in tests) SDPA is used. ``VFM_ATTENTION_BACKEND`` forces a backend.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Mapping, Optional

import torch
import torch.nn.functional as F

BACKENDS = ("sdpa", "flash", "te")
ENV = "VFM_ATTENTION_BACKEND"


def _find_installed() -> dict[str, bool]:
    import torch.nn.attention as attention

    return {
        "sdpa": True,
        "flash": importlib.util.find_spec("flash_attn") is not None,
        "te": importlib.util.find_spec("transformer_engine") is not None,
        # torch's own varlen flash kernel (CUDA): packed batches without a host loop
        "varlen": importlib.util.find_spec("torch.nn.attention.varlen") is not None,
    }


# Looked up once at import (cheap: nothing is imported) and read as a plain dict afterwards: a
# cached function call inside attention would be traced into every compiled block.
_INSTALLED = _find_installed()


def installed() -> Mapping[str, bool]:
    """Which optional attention libraries can be imported."""
    return _INSTALLED


def select_backend(
    device: torch.device,
    dtype: torch.dtype,
    requested: Optional[str] = None,
    available: Optional[Mapping[str, bool]] = None,
) -> str:
    """The backend to use: ``requested`` (or $VFM_ATTENTION_BACKEND) if given, else TE > flash > SDPA.

    The fused kernels need CUDA tensors in fp16/bf16; anything else falls back to SDPA. With no
    library installed, SDPA on CUDA dispatches to cuDNN's fused attention on Hopper (measured by
    ``benchmarks/gpu_attention.py``: 1.6x flash-attention 2 forward and 1.8x forward + backward).
    """
    available = _INSTALLED if available is None else available
    requested = requested or os.environ.get(ENV) or None
    if requested is not None:
        if requested not in BACKENDS:
            raise ValueError(f"unknown attention backend {requested!r}; accepted: {', '.join(BACKENDS)}")
        if not available.get(requested, False):
            raise RuntimeError(f"attention backend {requested!r} was requested but its library is not installed")
        return requested
    fused_ok = torch.device(device).type == "cuda" and dtype in (torch.float16, torch.bfloat16)
    if fused_ok:
        for name in ("te", "flash"):
            if available.get(name, False):
                return name
    return "sdpa"


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: Optional[torch.Tensor] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    backend: Optional[str] = None,
) -> torch.Tensor:
    """q (B, Hq, Sq, Dh); k, v (B, Hkv, Sk, Dh) -> (B, Hq, Sq, Dh).

    ``key_padding_mask`` (B, Sk) bool, True = attend; a query whose keys are all masked gets zeros.
    ``cu_seqlens_q/k`` (N+1,) mark packed samples in a B=1 batch; attention never crosses them.
    """
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"query heads ({q.shape[1]}) must be a multiple of key/value heads ({k.shape[1]})")
    packed = cu_seqlens_q is not None
    if packed and cu_seqlens_k is None:
        cu_seqlens_k, max_seqlen_k = cu_seqlens_q, max_seqlen_q
    if packed and q.shape[0] != 1:
        raise ValueError(f"a packed (cu_seqlens) batch must have batch size 1, got {q.shape[0]}")
    name = select_backend(q.device, q.dtype, backend)
    if name == "sdpa" or key_padding_mask is not None:
        # fused kernels take padding as cu_seqlens; a padded dense batch stays on SDPA
        if packed:
            if _varlen_ok(q, key_padding_mask):
                return _torch_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
            return _sdpa_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
        return _sdpa(q, k, v, key_padding_mask)
    if name == "flash":
        return _flash(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    return _te(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)


def _sdpa(q, k, v, key_padding_mask):
    gqa = q.shape[1] != k.shape[1]
    if key_padding_mask is None:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    # Branch-free (no host sync, one compiled graph): a row with no real key attends to all of its
    # keys, then its output is zeroed.
    mask = key_padding_mask.to(torch.bool)
    empty = ~mask.any(dim=1)  # (B,)
    mask = mask | empty[:, None]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :], enable_gqa=gqa)
    return out.masked_fill(empty[:, None, None, None], 0.0)


def _sdpa_varlen(q, k, v, cu_q, cu_k):
    """The reference for packed attention: each sample attends alone, results concatenated."""
    bounds_q, bounds_k = cu_q.tolist(), cu_k.tolist()
    if len(bounds_q) != len(bounds_k):
        raise ValueError(f"cu_seqlens_q has {len(bounds_q) - 1} samples but cu_seqlens_k has {len(bounds_k) - 1}")
    if bounds_q[-1] != q.shape[2] or bounds_k[-1] != k.shape[2]:
        raise ValueError(
            f"cu_seqlens end at {bounds_q[-1]} (q) / {bounds_k[-1]} (k) but the sequences hold "
            f"{q.shape[2]} / {k.shape[2]} tokens"
        )
    outs = []
    for i in range(len(bounds_q) - 1):
        qs = q[:, :, bounds_q[i] : bounds_q[i + 1]]
        ks = k[:, :, bounds_k[i] : bounds_k[i + 1]]
        vs = v[:, :, bounds_k[i] : bounds_k[i + 1]]
        if ks.shape[2] == 0:  # a sample without keys (e.g. empty caption) contributes zeros
            outs.append(torch.zeros_like(qs))
        else:
            outs.append(F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=q.shape[1] != k.shape[1]))
    return torch.cat(outs, dim=2)


def _varlen_ok(q: torch.Tensor, key_padding_mask) -> bool:
    return (_INSTALLED["varlen"] and key_padding_mask is None and q.is_cuda
            and q.dtype in (torch.float16, torch.bfloat16))


def _torch_varlen(q, k, v, cu_q, cu_k, max_q, max_k):
    """Packed attention with torch's varlen flash kernel: one launch for every sample, THD layout."""
    from torch.nn.attention.varlen import varlen_attn

    if q.shape[1] != k.shape[1]:  # GQA: torch 2.11's varlen kernel takes equal head counts only
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    # A sample without keys (an empty caption) gets zeros from the kernel, as from the reference.
    out = varlen_attn(
        q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),
        cu_q.to(torch.int32), cu_k.to(torch.int32),
        max_q or int((cu_q[1:] - cu_q[:-1]).max()), max_k or int((cu_k[1:] - cu_k[:-1]).max()),
    )
    return out.transpose(0, 1)[None]


def _flash(q, k, v, cu_q, cu_k, max_q, max_k):  # pragma: no cover - needs CUDA + flash-attn
    from flash_attn import flash_attn_func, flash_attn_varlen_func

    # flash-attn wants (B, S, H, Dh) / THD (total, H, Dh)
    if cu_q is None:
        return flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    out = flash_attn_varlen_func(
        q[0].transpose(0, 1),
        k[0].transpose(0, 1),
        v[0].transpose(0, 1),
        cu_q.to(torch.int32),
        cu_k.to(torch.int32),
        max_q or int((cu_q[1:] - cu_q[:-1]).max()),
        max_k or int((cu_k[1:] - cu_k[:-1]).max()),
    )
    return out.transpose(0, 1)[None]


@functools.lru_cache(maxsize=None)
def _te_module(num_heads: int, head_dim: int, num_kv_heads: int, qkv_format: str):  # pragma: no cover
    from transformer_engine.pytorch import DotProductAttention

    return DotProductAttention(
        num_heads, head_dim, num_gqa_groups=num_kv_heads, attention_dropout=0.0, qkv_format=qkv_format,
        attn_mask_type="padding" if qkv_format == "thd" else "no_mask",
    )


def _te(q, k, v, cu_q, cu_k, max_q, max_k):  # pragma: no cover - needs CUDA + transformer-engine
    hq, hkv, dh = q.shape[1], k.shape[1], q.shape[3]
    if cu_q is None:
        core = _te_module(hq, dh, hkv, "bshd")
        out = core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (B, S, H*Dh)
        return out.view(q.shape[0], q.shape[2], hq, dh).transpose(1, 2)
    core = _te_module(hq, dh, hkv, "thd")
    out = core(
        q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),
        cu_seqlens_q=cu_q.to(torch.int32), cu_seqlens_kv=cu_k.to(torch.int32),
        max_seqlen_q=max_q or int((cu_q[1:] - cu_q[:-1]).max()),
        max_seqlen_kv=max_k or int((cu_k[1:] - cu_k[:-1]).max()),
    )
    return out.view(q.shape[2], hq, dh).transpose(0, 1)[None]
