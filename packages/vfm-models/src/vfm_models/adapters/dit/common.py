"""What both DiT layouts share: their tensor names, the patch-embedding reshape, the vfm options of
a DiT and the checks that a vfm config is one a DiT format can express."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from vfm_models.adapters.base import AdapterConfigError


#: DiT's sizes (facebookresearch/DiT ``DiT_models``): hidden width -> heads, to read a bare .pt.
DIT_HEADS = {384: 6, 768: 12, 1024: 16, 1152: 16}
#: The formulation, sampling defaults and condition dropout DiT was trained with (a 1000-step
#: linear-beta DDPM predicting noise; labels dropped with p=0.1; DiT's and diffusers' default CFG 4).
DIT_META = {"formulation": "ddpm", "cond_dropout": 0.1, "guidance": 4.0,
            "formulation_options": {"num_train_timesteps": 1000, "beta_start": 1e-4, "beta_end": 0.02, "beta_schedule": "linear"}}

#: vfm name -> name in a block, per format (the per-block weights that only change their names).
BLOCK_NAMES = {
    "diffusers": {
        "adaln.linear": "norm1.linear", "attn.q": "attn1.to_q", "attn.k": "attn1.to_k", "attn.v": "attn1.to_v",
        "attn.o": "attn1.to_out.0", "mlp.fc1": "ff.net.0.proj", "mlp.fc2": "ff.net.2",
    },
    "facebookresearch": {
        "adaln.linear": "adaLN_modulation.1", "attn.o": "attn.proj", "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2",
    },
}
EMB = "transformer_blocks.{i}.norm1.emb."
DIFFUSERS_EMBEDDERS = {
    "t_embedder.mlp.0": "timestep_embedder.linear_1", "t_embedder.mlp.2": "timestep_embedder.linear_2",
    "y_embedder.table": "class_embedder.embedding_table",
}
FACEBOOK_TOP = {
    "t_embedder.mlp.0": "t_embedder.mlp.0", "t_embedder.mlp.2": "t_embedder.mlp.2",
    "y_embedder.table": "y_embedder.embedding_table",
    "final_layer.adaln.linear": "final_layer.adaLN_modulation.1", "final_layer.linear": "final_layer.linear",
}


# --- the pieces both formats share ------------------------------------------------------------

def name_map(fixed: Mapping[str, str], embedders: Mapping[str, str], embedder_prefix: str, depth: int,
             layout: str, block_prefix: str) -> dict[str, str]:
    """vfm name -> external name: ``fixed`` pairs as given, the embedders (weights, and biases but for
    the label table) under ``embedder_prefix``, and every block's layers (``BLOCK_NAMES[layout]``,
    weight and bias) under ``block_prefix`` + its index."""
    names = dict(fixed)
    for vfm_name, ext_name in embedders.items():
        names[vfm_name + ".weight"] = embedder_prefix + ext_name + ".weight"
        if not vfm_name.startswith("y_"):
            names[vfm_name + ".bias"] = embedder_prefix + ext_name + ".bias"
    for i in range(depth):
        for vfm_name, ext_name in BLOCK_NAMES[layout].items():
            for suffix in (".weight", ".bias"):
                names[f"blocks.{i}.{vfm_name}{suffix}"] = f"{block_prefix}{i}.{ext_name}{suffix}"
    return names


def conv_to_linear(weight: torch.Tensor) -> torch.Tensor:
    """Conv2d patch weight (D, C, p, p) -> vfm's Linear (D, 1*p*p*C) over (pt, ph, pw, C) patches."""
    return weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1)


def linear_to_conv(weight: torch.Tensor, channels: int, patch: int) -> torch.Tensor:
    """The inverse of :func:`conv_to_linear`."""
    return weight.reshape(weight.shape[0], patch, patch, channels).permute(0, 3, 1, 2).contiguous()


def depth_of(state: Mapping[str, torch.Tensor], prefix: str) -> int:
    indices = {int(k[len(prefix):].split(".", 1)[0]) for k in state if k.startswith(prefix)}
    return max(indices) + 1 if indices else 0


def expected_vfm(options: Mapping[str, Any]) -> dict[str, torch.Size]:
    """The vfm ``dit`` state dict's shapes for ``options``, built on the meta device (no memory)."""
    import vfm_models

    family = vfm_models.get_family("dit")
    with torch.device("meta"):
        model = family.build(family.config(**tuple_patch(options)))
    return {k: v.shape for k, v in model.state_dict().items()}


def tuple_patch(options: Mapping[str, Any]) -> dict[str, Any]:
    """The family options without the format's extras (``input_size``), patch as a tuple."""
    out = {k: v for k, v in options.items() if k != "input_size"}
    if "patch" in out:
        out["patch"] = tuple(out["patch"])
    return out


def check_expressible(options: Mapping[str, Any], wanted: Mapping[str, Any], target: str) -> None:
    """Refuse vfm options that ``target`` cannot express, naming each field and what it must be."""
    import vfm_models

    cfg = vfm_models.get_family("dit").config(**tuple_patch(options))
    wrong = [f"{k} = {getattr(cfg, k)!r} (needs {v!r})" for k, v in wanted.items() if getattr(cfg, k) != v]
    if cfg.patch[0] != 1 or cfg.patch[1] != cfg.patch[2]:
        wrong.append(f"patch = {cfg.patch} (needs (1, p, p): DiT patches single frames, square)")
    if cfg.kv_heads != cfg.num_heads:
        wrong.append(f"num_kv_heads = {cfg.num_kv_heads} (needs num_heads: no GQA)")
    if not cfg.num_classes:
        wrong.append("num_classes = 0 (needs > 0: DiT is class-conditional)")
    if wrong:
        raise AdapterConfigError(f"this dit config cannot be written as {target}: " + "; ".join(wrong))


DIT_LIKE = {"norm": "layer", "mlp": "gelu", "mlp_ratio": 4.0, "qk_norm": False, "pos_embed": "sincos2d",
             "adaln_lora_rank": 0, "text_dim": 0}


def vfm_options(in_channels: int, out_channels: int, patch: int, hidden: int, depth: int, heads: int,
                num_classes: int, **extra: Any) -> dict[str, Any]:
    return {
        "in_channels": in_channels, "out_channels": None if out_channels == in_channels else out_channels,
        "patch": [1, patch, patch], "hidden": hidden, "depth": depth, "num_heads": heads,
        "num_classes": num_classes, **{k: v for k, v in DIT_LIKE.items() if k != "text_dim"}, **extra,
    }


def filled(options: Mapping[str, Any]) -> dict[str, Any]:
    """The vfm options with the dit config's defaults filled in (as plain values)."""
    import dataclasses

    import vfm_models

    cfg = vfm_models.get_family("dit").config(**tuple_patch(options))
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def size_text(o: Mapping[str, Any]) -> str:
    return f"hidden {o['hidden']}, depth {o['depth']}, patch {tuple(o['patch'])}, in/out channels {o['in_channels']}/{o['out_channels'] or o['in_channels']}"
