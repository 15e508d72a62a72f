"""diffusers ``DiTTransformer2DModel`` <-> vfm ``dit``."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from vfm_models.adapters.base import AdapterConfigError, StateDictAdapter, check_config_keys, check_keys
from vfm_models.adapters.dit.common import (
    DIFFUSERS_EMBEDDERS, DIT_LIKE, DIT_META, EMB, check_expressible, conv_to_linear, expected_vfm, filled,
    linear_to_conv, name_map, size_text, vfm_options,
)


class DiffusersDiT(StateDictAdapter):
    """diffusers ``DiTTransformer2DModel`` (config.json + diffusion_pytorch_model.safetensors)."""

    name = "diffusers-dit"
    family = "dit"
    diffusers_class = "DiTTransformer2DModel"

    #: config.json fields vfm's dit computes one way only: the value it needs.
    FIXED = {"norm_type": "ada_norm_zero", "activation_fn": "gelu-approximate", "attention_bias": True,
             "norm_elementwise_affine": False}
    #: Fields of the legacy ``Transformer2DModel`` (DiT pipelines saved before diffusers 0.28): a DiT
    #: has these values (its default); any other one is another model (PixArt, text cross-attention...).
    LEGACY_FIXED = {"cross_attention_dim": None, "num_vector_embeds": None, "only_cross_attention": False,
                    "double_self_attention": False, "attention_type": "default", "caption_channels": None,
                    "interpolation_scale": None, "use_additional_conditions": None}
    #: Fields that do not change what a patched DiT computes: ``norm_num_groups`` and
    #: ``use_linear_projection`` are used by Transformer2DModel's continuous (non-patch) input only,
    #: ``upcast_attention`` only the precision of half-precision attention, ``sample_size`` the latent
    #: size (the export's ``latent_shape``).
    IGNORED = ("norm_num_groups", "use_linear_projection", "upcast_attention", "sample_size")
    #: The fields read into vfm options.
    READ = ("in_channels", "out_channels", "num_layers", "patch_size", "num_attention_heads", "attention_head_dim",
            "num_embeds_ada_norm", "norm_eps", "dropout")

    def accepts_class(self, class_name: str | None, external_config: Mapping[str, Any]) -> bool:
        """Also the legacy ``Transformer2DModel`` configs of DiT pipelines saved before diffusers 0.28
        (diffusers itself maps those to DiTTransformer2DModel): adaLN-Zero with a patch size."""
        legacy = (class_name == "Transformer2DModel" and external_config.get("norm_type") == "ada_norm_zero"
                  and external_config.get("patch_size") is not None)
        return class_name == self.diffusers_class or legacy

    def options_from_external(self, external_config: dict) -> dict:
        check_config_keys(external_config, (*self.READ, *self.FIXED, *self.LEGACY_FIXED, *self.IGNORED),
                          self.diffusers_class)
        c = {"in_channels": 4, "out_channels": None, "num_layers": 28, "patch_size": 2, "num_attention_heads": 16,
             "attention_head_dim": 72, "num_embeds_ada_norm": 1000, "norm_eps": 1e-5, "dropout": 0.0,
             **self.FIXED, **self.LEGACY_FIXED, **external_config}
        wrong = [f"{k} = {c[k]!r} (vfm's dit needs {v!r})" for k, v in self.FIXED.items() if c[k] != v]
        if c["dropout"]:
            wrong.append(f"dropout = {c['dropout']} (vfm's dit has no dropout; needs 0)")
        if c["cross_attention_dim"] is not None:  # a legacy Transformer2DModel with text cross-attention
            wrong.append(f"cross_attention_dim = {c['cross_attention_dim']} (DiT has no cross-attention; needs null)")
        # False is the default too (diffusers reads None as False for a DiT); 1 is interpolation_scale's DiT value
        legacy_ok = {"use_additional_conditions": (None, False), "interpolation_scale": (None, 1, 1.0)}
        wrong += [f"{k} = {c[k]!r} (a legacy Transformer2DModel DiT has {v!r}; this is another model)"
                  for k, v in self.LEGACY_FIXED.items()
                  if k != "cross_attention_dim" and c[k] not in legacy_ok.get(k, (v,))]
        if not c["num_embeds_ada_norm"]:
            wrong.append("num_embeds_ada_norm unset (needs the number of classes)")
        if wrong:
            raise AdapterConfigError(f"{self.diffusers_class} config fields vfm cannot convert: " + "; ".join(wrong))
        heads, head_dim = int(c["num_attention_heads"]), int(c["attention_head_dim"])
        in_ch = int(c["in_channels"])
        return vfm_options(in_ch, int(c["out_channels"] or in_ch), int(c["patch_size"]), heads * head_dim,
                           int(c["num_layers"]), heads, int(c["num_embeds_ada_norm"]),
                           timestep_freq_shift=1, mlp_norm_eps=float(c["norm_eps"]))

    def options_to_external(self, options: dict) -> dict:
        check_expressible(options, {**DIT_LIKE, "timestep_freq_shift": 1}, f"a diffusers {self.diffusers_class}")
        o = filled(options)
        return {
            "num_attention_heads": o["num_heads"], "attention_head_dim": o["hidden"] // o["num_heads"],
            "in_channels": o["in_channels"], "out_channels": o["out_channels"] or o["in_channels"],
            "num_layers": o["depth"], "patch_size": int(o["patch"][1]), "num_embeds_ada_norm": o["num_classes"],
            "norm_eps": o["mlp_norm_eps"], "dropout": 0.0, "upcast_attention": False, **self.FIXED,
        }

    def meta_from_external(self, external_config: dict) -> dict[str, Any]:
        size = int(external_config.get("sample_size", 32))
        return {"latent_shape": [int(external_config.get("in_channels", 4)), 1, size, size], **DIT_META}

    def external_from_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        shape = meta.get("latent_shape")
        if not shape or shape[2] != shape[3] or shape[1] != 1:
            raise AdapterConfigError(f"a diffusers {self.diffusers_class} needs one square latent frame "
                                     f"(its sample_size); the export's latent_shape is {shape}")
        return {"sample_size": int(shape[2])}

    def from_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        o = filled(options)
        depth = o["depth"]
        ext = self._names(depth)
        expected = expected_vfm(options)
        ext_expected = {v: expected[k] for k, v in ext.items()}
        ext_expected["pos_embed.proj.weight"] = (o["hidden"], o["in_channels"], o["patch"][1], o["patch"][2])
        check_keys(ext_expected, self._block0_only(state_dict, depth), f"this {self.diffusers_class} state dict (vfm dit {size_text(o)})")
        self._check_shared_embedders(state_dict, depth)
        out = {k: state_dict[v] for k, v in ext.items() if k != "x_embedder.proj.weight"}
        out["x_embedder.proj.weight"] = conv_to_linear(state_dict["pos_embed.proj.weight"])
        return out

    def to_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        o = filled(options)
        check_keys(expected_vfm(options), state_dict, f"this vfm dit state dict ({size_text(o)})")
        ext = self._names(o["depth"])
        out = {v: state_dict[k] for k, v in ext.items() if k != "x_embedder.proj.weight"}
        out["pos_embed.proj.weight"] = linear_to_conv(state_dict["x_embedder.proj.weight"], o["in_channels"], o["patch"][1])
        for i in range(1, o["depth"]):  # diffusers keeps a copy of the embedders in every block
            for vfm_name, ext_name in DIFFUSERS_EMBEDDERS.items():
                for suffix in (".weight", ".bias"):
                    if vfm_name + suffix in state_dict:
                        out[EMB.format(i=i) + ext_name + suffix] = state_dict[vfm_name + suffix].clone()
        return out

    @staticmethod
    def _names(depth: int) -> dict[str, str]:
        """vfm name -> diffusers name for every tensor but block 1.. embedder copies."""
        fixed = {"x_embedder.proj.weight": "pos_embed.proj.weight", "x_embedder.proj.bias": "pos_embed.proj.bias",
                 "final_layer.adaln.linear.weight": "proj_out_1.weight", "final_layer.adaln.linear.bias": "proj_out_1.bias",
                 "final_layer.linear.weight": "proj_out_2.weight", "final_layer.linear.bias": "proj_out_2.bias"}
        return name_map(fixed, DIFFUSERS_EMBEDDERS, EMB.format(i=0), depth, "diffusers", "transformer_blocks.")

    @staticmethod
    def _block0_only(state: Mapping[str, torch.Tensor], depth: int) -> dict[str, torch.Tensor]:
        """``state`` without the embedder copies of blocks 1.. (checked equal to block 0's already)."""
        copies = tuple(EMB.format(i=i) for i in range(1, depth))
        return {k: v for k, v in state.items() if not k.startswith(copies)}

    def _check_shared_embedders(self, state: Mapping[str, torch.Tensor], depth: int) -> None:
        """vfm's dit has one timestep and class embedder; diffusers' converter writes the same copy into
        every block, and a checkpoint whose copies differ cannot be represented: refuse it by name."""
        differing = []
        for i in range(1, depth):
            for key in state:
                if key.startswith(EMB.format(i=0)):
                    other = EMB.format(i=i) + key[len(EMB.format(i=0)):]
                    if other in state and not torch.equal(state[other], state[key]):
                        differing.append(other)
        if differing:
            raise AdapterConfigError(
                f"vfm's dit shares one timestep and class embedder across blocks, but this {self.diffusers_class} "
                f"has different ones in {len(differing)} tensors ({', '.join(differing[:4])}...); checkpoints "
                "converted from DiT hold identical copies")


DIFFUSERS_DIT = DiffusersDiT()
