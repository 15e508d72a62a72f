"""facebookresearch/DiT ``models.py`` state dicts <-> vfm ``dit``."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from vfm_models.adapters.base import AdapterConfigError, AdapterKeyError, StateDictAdapter, check_config_keys, check_keys
from vfm_models.adapters.dit.common import (
    DIT_HEADS, DIT_LIKE, DIT_META, FACEBOOK_TOP, check_expressible, conv_to_linear, depth_of,
    expected_vfm, filled, linear_to_conv, name_map, size_text, vfm_options,
)


class FacebookResearchDiT(StateDictAdapter):
    """facebookresearch/DiT ``models.py`` state dicts (the released ``DiT-XL-2-256x256.pt``, or the
    ``ema``/``model`` entry of a training checkpoint). The external config is DiT's constructor
    arguments (``input_size``, ``patch_size``, ``in_channels``, ``hidden_size``, ``depth``,
    ``num_heads``, ``num_classes``, ``learn_sigma``), read from the weights' shapes when absent."""

    name = "facebookresearch-dit"
    family = "dit"
    diffusers_class = None

    def matches(self, state_dict: Mapping[str, torch.Tensor]) -> bool:
        return "blocks.0.attn.qkv.weight" in state_dict and "x_embedder.proj.weight" in state_dict

    def config_from_state_dict(self, state_dict: Mapping[str, torch.Tensor]) -> dict:
        needed = ("x_embedder.proj.weight", "pos_embed", "y_embedder.embedding_table.weight", "final_layer.linear.weight")
        missing = [k for k in needed if k not in state_dict]
        if missing:
            raise AdapterKeyError(f"not a facebookresearch/DiT state dict: missing {', '.join(missing)}")
        hidden, channels, patch, _ = state_dict["x_embedder.proj.weight"].shape
        tokens = state_dict["pos_embed"].shape[1]
        out = state_dict["final_layer.linear.weight"].shape[0] // (patch * patch)
        side = round(tokens**0.5) * patch
        config = {"input_size": side, "patch_size": patch, "in_channels": channels, "hidden_size": hidden,
                  "depth": depth_of(state_dict, "blocks."), "num_classes": state_dict["y_embedder.embedding_table.weight"].shape[0] - 1,
                  "learn_sigma": out == 2 * channels}
        if hidden in DIT_HEADS:
            config["num_heads"] = DIT_HEADS[hidden]
        return config

    #: DiT's constructor arguments (facebookresearch/DiT ``models.py``): the external config's keys.
    KEYS = ("input_size", "patch_size", "in_channels", "hidden_size", "depth", "num_heads", "mlp_ratio",
            "class_dropout_prob", "num_classes", "learn_sigma")

    def options_from_external(self, external_config: dict) -> dict:
        check_config_keys(external_config, self.KEYS, "facebookresearch/DiT")
        c = {"patch_size": 2, "in_channels": 4, "hidden_size": 1152, "depth": 28, "num_classes": 1000,
             "learn_sigma": True, "mlp_ratio": 4.0, "class_dropout_prob": 0.1, **external_config}
        if float(c["mlp_ratio"]) != DIT_LIKE["mlp_ratio"]:
            raise AdapterConfigError(f"mlp_ratio = {c['mlp_ratio']!r}: vfm's dit conversion reads DiT's {DIT_LIKE['mlp_ratio']}")
        if not float(c["class_dropout_prob"]) > 0:  # DiT then has no null-class row, which guidance and dropout use
            raise AdapterConfigError(f"class_dropout_prob = {c['class_dropout_prob']!r}: vfm's dit needs DiT's null class "
                                     "(class_dropout_prob > 0, which adds its embedding row)")
        heads = c.get("num_heads") or DIT_HEADS.get(int(c["hidden_size"]))
        if heads is None:
            raise AdapterConfigError(f"hidden_size {c['hidden_size']} is none of DiT's sizes ({', '.join(map(str, DIT_HEADS))}); "
                                     "give num_heads (vfm convert --set num_heads=N)")
        in_ch = int(c["in_channels"])
        return vfm_options(in_ch, 2 * in_ch if c["learn_sigma"] else in_ch, int(c["patch_size"]), int(c["hidden_size"]),
                           int(c["depth"]), int(heads), int(c["num_classes"]))

    def options_to_external(self, options: dict) -> dict:
        check_expressible(options, {**DIT_LIKE, "timestep_freq_shift": 0, "mlp_norm_eps": 1e-6}, "a facebookresearch/DiT")
        o = filled(options)
        if "input_size" not in options:
            raise AdapterConfigError("facebookresearch/DiT's config needs input_size (the latent side): pass it in the options")
        return {"input_size": int(options["input_size"]), "patch_size": int(o["patch"][1]), "in_channels": o["in_channels"],
                "hidden_size": o["hidden"], "depth": o["depth"], "num_heads": o["num_heads"],
                "num_classes": o["num_classes"], "learn_sigma": (o["out_channels"] or o["in_channels"]) == 2 * o["in_channels"]}

    def meta_from_external(self, external_config: dict) -> dict[str, Any]:
        size = int(external_config.get("input_size", 32))
        return {"latent_shape": [int(external_config.get("in_channels", 4)), 1, size, size], **DIT_META,
                "cond_dropout": float(external_config.get("class_dropout_prob", DIT_META["cond_dropout"]))}

    def external_from_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        shape = meta.get("latent_shape") or [0, 0, 0, 0]
        return {"input_size": int(shape[2])}

    def from_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        o = filled(options)
        expected = expected_vfm(options)
        names = self._names(o["depth"])
        ext_expected = {v: expected[k] for k, v in names.items() if not k.startswith(("blocks.", "x_embedder.proj.weight"))}
        D = o["hidden"]
        ext_expected["x_embedder.proj.weight"] = (D, o["in_channels"], o["patch"][1], o["patch"][2])
        for i in range(o["depth"]):
            ext_expected |= {f"blocks.{i}.attn.qkv.weight": (3 * D, D), f"blocks.{i}.attn.qkv.bias": (3 * D,)}
            ext_expected |= {v: expected[k] for k, v in names.items() if k.startswith(f"blocks.{i}.")}
        if "pos_embed" in state_dict:
            ext_expected["pos_embed"] = (1, state_dict["pos_embed"].shape[1], D)
        check_keys(ext_expected, state_dict, f"this facebookresearch/DiT state dict (vfm dit {size_text(o)})")
        self._check_pos_embed(state_dict, D, o["patch"][1])
        out = {k: state_dict[v] for k, v in names.items() if k != "x_embedder.proj.weight"}
        out["x_embedder.proj.weight"] = conv_to_linear(state_dict["x_embedder.proj.weight"])
        for i in range(o["depth"]):
            for part in ("weight", "bias"):
                q, k, v = state_dict[f"blocks.{i}.attn.qkv.{part}"].chunk(3, dim=0)
                out |= {f"blocks.{i}.attn.q.{part}": q, f"blocks.{i}.attn.k.{part}": k, f"blocks.{i}.attn.v.{part}": v}
        return out

    def to_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        """DiT's layout, including its fixed ``pos_embed`` parameter, whose size needs
        ``options["input_size"]`` (the latent side) beside the vfm options."""
        from vfm_models.blocks.position import sincos_2d

        o = filled(options)
        check_keys(expected_vfm(options), state_dict, f"this vfm dit state dict ({size_text(o)})")
        if "input_size" not in options:
            raise AdapterConfigError("facebookresearch/DiT's state dict holds its pos_embed table, whose size needs "
                                     "input_size (the latent side): pass options={**vfm_options, 'input_size': N}")
        p = o["patch"][1]
        names = self._names(o["depth"])
        out = {v: state_dict[k] for k, v in names.items() if k != "x_embedder.proj.weight"}
        out["x_embedder.proj.weight"] = linear_to_conv(state_dict["x_embedder.proj.weight"], o["in_channels"], p)
        for i in range(o["depth"]):
            for part in ("weight", "bias"):
                out[f"blocks.{i}.attn.qkv.{part}"] = torch.cat([state_dict[f"blocks.{i}.attn.{n}.{part}"] for n in "qkv"])
        grid = int(options["input_size"]) // p
        out["pos_embed"] = sincos_2d((1, grid, grid), o["hidden"])[None]
        return out

    @staticmethod
    def _names(depth: int) -> dict[str, str]:
        """vfm name -> DiT name for every tensor but the fused qkv and the pos_embed table."""
        fixed = {"x_embedder.proj.weight": "x_embedder.proj.weight", "x_embedder.proj.bias": "x_embedder.proj.bias"}
        return name_map(fixed, FACEBOOK_TOP, "", depth, "facebookresearch", "blocks.")

    @staticmethod
    def _check_pos_embed(state: Mapping[str, torch.Tensor], hidden: int, patch: int) -> None:
        """DiT's pos_embed is a fixed table; vfm recomputes it, so it must be DiT's 2-D sin-cos one."""
        from vfm_models.blocks.position import sincos_2d

        if "pos_embed" not in state:
            return
        tokens = state["pos_embed"].shape[1]
        grid = round(tokens**0.5)
        if grid * grid != tokens:
            raise AdapterConfigError(f"pos_embed has {tokens} positions, not a square grid")
        table = sincos_2d((1, grid, grid), hidden)
        diff = float((state["pos_embed"][0].float() - table).abs().max())
        if diff > 1e-4:
            raise AdapterConfigError(f"this checkpoint's pos_embed differs from DiT's 2-D sin-cos table by up to {diff:.3g}: "
                                     "vfm recomputes that table, so a learned or different one cannot be converted")


FACEBOOKRESEARCH_DIT = FacebookResearchDiT()
