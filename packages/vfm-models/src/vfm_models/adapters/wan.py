"""diffusers ``WanTransformer3DModel`` (Wan 2.1 text-to-video) state dicts <-> vfm's ``wan`` family.

The layers are the same maths under other names, except the patch embedding: diffusers' Conv3d weight
(D, C, pt, ph, pw) is vfm's Linear over flattened (pt, ph, pw, C) patches.
"""

from __future__ import annotations

import re
from typing import Dict, Mapping

import torch

from vfm_models.adapters.base import AdapterConfigError, StateDictAdapter, check_config_keys, check_keys, is_metadata_key

#: vfm name -> diffusers name, for the parameters outside the blocks.
_TOP = {
    "x_embedder.proj.weight": "patch_embedding.weight",
    "x_embedder.proj.bias": "patch_embedding.bias",
    "t_embedder.mlp.0.weight": "condition_embedder.time_embedder.linear_1.weight",
    "t_embedder.mlp.0.bias": "condition_embedder.time_embedder.linear_1.bias",
    "t_embedder.mlp.2.weight": "condition_embedder.time_embedder.linear_2.weight",
    "t_embedder.mlp.2.bias": "condition_embedder.time_embedder.linear_2.bias",
    "adaln_shared.linear.weight": "condition_embedder.time_proj.weight",
    "adaln_shared.linear.bias": "condition_embedder.time_proj.bias",
    "text_embedder.fc1.weight": "condition_embedder.text_embedder.linear_1.weight",
    "text_embedder.fc1.bias": "condition_embedder.text_embedder.linear_1.bias",
    "text_embedder.fc2.weight": "condition_embedder.text_embedder.linear_2.weight",
    "text_embedder.fc2.bias": "condition_embedder.text_embedder.linear_2.bias",
    "final_layer.adaln.table": "scale_shift_table",
    "final_layer.linear.weight": "proj_out.weight",
    "final_layer.linear.bias": "proj_out.bias",
}

#: vfm name -> diffusers name inside block i (``blocks.{i}.`` on both sides).
_BLOCK = {"adaln.table": "scale_shift_table", "norm_cross.weight": "norm2.weight", "norm_cross.bias": "norm2.bias",
          "mlp.fc1.weight": "ffn.net.0.proj.weight", "mlp.fc1.bias": "ffn.net.0.proj.bias",
          "mlp.fc2.weight": "ffn.net.2.weight", "mlp.fc2.bias": "ffn.net.2.bias"}
for _ours, _theirs in (("attn", "attn1"), ("cross_attn", "attn2")):
    for _a, _b in (("q", "to_q"), ("k", "to_k"), ("v", "to_v"), ("o", "to_out.0")):
        for _p in ("weight", "bias"):
            _BLOCK[f"{_ours}.{_a}.{_p}"] = f"{_theirs}.{_b}.{_p}"
    _BLOCK[f"{_ours}.q_norm.weight"] = f"{_theirs}.norm_q.weight"
    _BLOCK[f"{_ours}.k_norm.weight"] = f"{_theirs}.norm_k.weight"

_BLOCK_KEY = re.compile(r"blocks\.(\d+)\.(.+)")

#: diffusers config key -> what vfm requires of it (the Wan 2.1 text-to-video layout).
_FIXED_EXTERNAL = {"cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "image_dim": None,
                   "added_kv_proj_dim": None, "pos_embed_seq_len": None}
#: wan options that diffusers' Wan hard-codes (rope theta, timestep range, no text mask).
_DIFFUSERS_FIXED = {"rope_theta": 10000.0, "timestep_scale": 1000.0, "use_text_mask": False}
_SHAPE_KEYS = ("patch_size", "num_attention_heads", "attention_head_dim", "in_channels", "out_channels", "text_dim",
               "freq_dim", "ffn_dim", "num_layers", "eps", "rope_max_seq_len")


def _rename(name: str, table: Mapping[str, str], block_table: Mapping[str, str]) -> str | None:
    if name in table:
        return table[name]
    match = _BLOCK_KEY.fullmatch(name)
    if match and match.group(2) in block_table:
        return f"blocks.{match.group(1)}.{block_table[match.group(2)]}"
    return None


_TOP_BACK = {v: k for k, v in _TOP.items()}
_BLOCK_BACK = {v: k for k, v in _BLOCK.items()}


def _config(options: Mapping):
    from vfm_models.families.wan.model import WanConfig

    return WanConfig(**{k: v for k, v in options.items() if k != "mlp_ratio"})


def _meta_state_dict(options: Mapping) -> Dict[str, torch.Tensor]:
    """The vfm state dict's names and shapes for ``options`` (a model built on the meta device)."""
    from vfm_models.families.wan.model import Wan

    with torch.device("meta"):
        return Wan(_config(options)).state_dict()


class DiffusersWanAdapter(StateDictAdapter):
    """``diffusers-wan``: a ``WanTransformer3DModel`` folder (config.json + safetensors) <-> ``wan``."""

    name = "diffusers-wan"
    family = "wan"
    diffusers_class = "WanTransformer3DModel"

    def options_from_external(self, external_config: Mapping) -> dict:
        """diffusers' transformer config.json -> ``wan`` config options; refuses what vfm's wan cannot express."""
        config = {k: v for k, v in external_config.items() if not is_metadata_key(k)}
        check_config_keys(config, (*_SHAPE_KEYS, *_FIXED_EXTERNAL), self.diffusers_class)
        wrong = {k: config[k] for k, v in _FIXED_EXTERNAL.items() if k in config and config[k] != v}
        if wrong:
            raise AdapterConfigError(
                f"vfm's wan family holds Wan 2.1 text-to-video only ({', '.join(f'{k}={v!r}' for k, v in _FIXED_EXTERNAL.items())}); "
                f"this checkpoint has {wrong} (image-to-video and other variants are not supported)"
            )
        heads, head_dim = int(config.get("num_attention_heads", 40)), int(config.get("attention_head_dim", 128))
        in_channels = int(config.get("in_channels", 16))
        out_channels = int(config.get("out_channels") or in_channels)
        return dict(
            in_channels=in_channels,
            **({} if out_channels == in_channels else {"out_channels": out_channels}),  # wan refuses others
            patch=tuple(int(p) for p in config.get("patch_size", (1, 2, 2))),
            hidden=heads * head_dim,
            depth=int(config.get("num_layers", 40)),
            num_heads=heads,
            ffn_dim=int(config.get("ffn_dim", 13824)),
            text_dim=int(config.get("text_dim", 4096)),
            freq_dim=int(config.get("freq_dim", 256)),
            eps=float(config.get("eps", 1e-6)),
        )

    def meta_from_external(self, external_config: Mapping) -> dict:
        """Wan 2.1 samples rectified flow (x_s = (1-s) x0 + s eps, velocity eps - x0) with guidance 5 at
        480p: 81 frames of 832 x 480 are a (16, 21, 60, 104) latent (4x time, 8x space VAE)."""
        channels = int(external_config.get("in_channels", 16))
        return {"formulation": "rectified-flow", "guidance": 5.0, "latent_shape": [channels, 21, 60, 104]}

    def options_to_external(self, options: Mapping) -> dict:
        """``wan`` config options (a ``WanConfig``'s fields or a subset over its defaults) -> diffusers config."""
        cfg = _config(options)
        differ = {k: getattr(cfg, k) for k, v in _DIFFUSERS_FIXED.items() if getattr(cfg, k) != v}
        if differ:
            raise AdapterConfigError(f"{self.diffusers_class} computes with {_DIFFUSERS_FIXED}; this wan model has "
                                     f"{differ}, which a diffusers folder cannot express")
        return dict(
            patch_size=list(cfg.patch), num_attention_heads=cfg.num_heads, attention_head_dim=cfg.head_dim,
            in_channels=cfg.in_channels, out_channels=cfg.output_channels, text_dim=cfg.text_dim,
            freq_dim=cfg.freq_dim, ffn_dim=cfg.ffn_dim, num_layers=cfg.depth, eps=cfg.eps,
            rope_max_seq_len=1024, **_FIXED_EXTERNAL,
        )

    def from_external(self, state_dict: Mapping[str, torch.Tensor], options: Mapping) -> Dict[str, torch.Tensor]:
        """diffusers tensors -> vfm tensors (names and the patch embedding's layout); the checkpoint's
        names and shapes must be exactly those of ``options`` (else :class:`AdapterKeyError`)."""
        expected = self.to_external(_meta_state_dict(options), options)
        check_keys(expected, state_dict, f"this {self.diffusers_class} checkpoint")
        out: Dict[str, torch.Tensor] = {}
        for name, tensor in state_dict.items():
            ours = _rename(name, _TOP_BACK, _BLOCK_BACK)
            if ours == "x_embedder.proj.weight":  # (D, C, pt, ph, pw) -> (D, pt*ph*pw*C)
                tensor = tensor.permute(0, 2, 3, 4, 1).reshape(tensor.shape[0], -1)
            out[ours] = tensor
        return out

    def to_external(self, state_dict: Mapping[str, torch.Tensor], options: Mapping) -> Dict[str, torch.Tensor]:
        """vfm tensors -> diffusers tensors; the names and shapes must be those of ``options``."""
        cfg = _config(options)
        check_keys(_meta_state_dict(options), state_dict, "this wan state dict")
        out: Dict[str, torch.Tensor] = {}
        for name, tensor in state_dict.items():
            theirs = _rename(name, _TOP, _BLOCK)
            if name == "x_embedder.proj.weight":  # (D, pt*ph*pw*C) -> (D, C, pt, ph, pw)
                tensor = tensor.reshape(tensor.shape[0], *cfg.patch, cfg.in_channels).permute(0, 4, 1, 2, 3)
            out[theirs] = tensor.contiguous()
        return out


DIFFUSERS_WAN = DiffusersWanAdapter()
