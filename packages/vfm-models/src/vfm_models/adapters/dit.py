"""DiT checkpoints <-> vfm ``dit``: diffusers' ``DiTTransformer2DModel`` and facebookresearch/DiT's
``models.py`` layout.

The blocks are the same computation; what differs is at the edges:

- patch embedding: a Conv2d (D, C, p, p) there, a Linear over (pt=1, ph, pw, C) patches here;
- positions: DiT's fixed 2-D sin-cos table (vfm ``pos_embed="sincos2d"``);
- attention: facebookresearch fuses q, k, v into one ``qkv`` Linear (3D, D) in that order;
- conditioning: one timestep/class embedder; diffusers keeps an identical copy in every block (its
  converter writes the same tensors into each) and its timestep features divide by dim/2 - 1
  (``timestep_freq_shift=1``), and its MLP LayerNorm uses ``norm_eps`` (vfm ``mlp_norm_eps``);
- learned sigma: 2 x in_channels outputs, the noise prediction first, then the variance.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from vfm_models.adapters.base import AdapterConfigError, AdapterKeyError, StateDictAdapter, check_keys

#: DiT's sizes (facebookresearch/DiT ``DiT_models``): hidden width -> heads, to read a bare .pt.
DIT_HEADS = {384: 6, 768: 12, 1024: 16, 1152: 16}
#: The formulation, sampling defaults and condition dropout DiT was trained with (a 1000-step
#: linear-beta DDPM predicting noise; labels dropped with p=0.1; DiT's and diffusers' default CFG 4).
DIT_META = {"formulation": "ddpm", "cond_dropout": 0.1, "guidance": 4.0,
            "formulation_options": {"num_train_timesteps": 1000, "beta_start": 1e-4, "beta_end": 0.02, "beta_schedule": "linear"}}

#: vfm name -> name in a block, per format (the per-block weights that only change their names).
_BLOCK_NAMES = {
    "diffusers": {
        "adaln.linear": "norm1.linear", "attn.q": "attn1.to_q", "attn.k": "attn1.to_k", "attn.v": "attn1.to_v",
        "attn.o": "attn1.to_out.0", "mlp.fc1": "ff.net.0.proj", "mlp.fc2": "ff.net.2",
    },
    "facebookresearch": {
        "adaln.linear": "adaLN_modulation.1", "attn.o": "attn.proj", "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2",
    },
}
_EMB = "transformer_blocks.{i}.norm1.emb."
_DIFFUSERS_EMBEDDERS = {
    "t_embedder.mlp.0": "timestep_embedder.linear_1", "t_embedder.mlp.2": "timestep_embedder.linear_2",
    "y_embedder.table": "class_embedder.embedding_table",
}
_FACEBOOK_TOP = {
    "t_embedder.mlp.0": "t_embedder.mlp.0", "t_embedder.mlp.2": "t_embedder.mlp.2",
    "y_embedder.table": "y_embedder.embedding_table",
    "final_layer.adaln.linear": "final_layer.adaLN_modulation.1", "final_layer.linear": "final_layer.linear",
}


# --- the pieces both formats share ---------------------------------------------------------------

def conv_to_linear(weight: torch.Tensor) -> torch.Tensor:
    """Conv2d patch weight (D, C, p, p) -> vfm's Linear (D, 1*p*p*C) over (pt, ph, pw, C) patches."""
    return weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1)


def linear_to_conv(weight: torch.Tensor, channels: int, patch: int) -> torch.Tensor:
    """The inverse of :func:`conv_to_linear`."""
    return weight.reshape(weight.shape[0], patch, patch, channels).permute(0, 3, 1, 2).contiguous()


def _depth(state: Mapping[str, torch.Tensor], prefix: str) -> int:
    indices = {int(k[len(prefix):].split(".", 1)[0]) for k in state if k.startswith(prefix)}
    return max(indices) + 1 if indices else 0


def _renamed(state: Mapping[str, torch.Tensor], names: Mapping[str, str]) -> dict[str, torch.Tensor]:
    """{new + suffix: state[old + suffix]} for each (new, old) module pair and its weight/bias."""
    out = {}
    for new, old in names.items():
        for suffix in (".weight", ".bias"):
            if old + suffix in state:
                out[new + suffix] = state[old + suffix]
    return out


def _expected_vfm(options: Mapping[str, Any]) -> dict[str, torch.Size]:
    """The vfm ``dit`` state dict's shapes for ``options``, built on the meta device (no memory)."""
    import vfm_models

    family = vfm_models.get_family("dit")
    with torch.device("meta"):
        model = family.build(family.config(**_tuple_patch(options)))
    return {k: v.shape for k, v in model.state_dict().items()}


def _tuple_patch(options: Mapping[str, Any]) -> dict[str, Any]:
    """The family options without the format's extras (``input_size``), patch as a tuple."""
    out = {k: v for k, v in options.items() if k != "input_size"}
    if "patch" in out:
        out["patch"] = tuple(out["patch"])
    return out


def _check_expressible(options: Mapping[str, Any], wanted: Mapping[str, Any], target: str) -> None:
    """Refuse vfm options that ``target`` cannot express, naming each field and what it must be."""
    import vfm_models

    cfg = vfm_models.get_family("dit").config(**_tuple_patch(options))
    wrong = [f"{k} = {getattr(cfg, k)!r} (needs {v!r})" for k, v in wanted.items() if getattr(cfg, k) != v]
    if cfg.patch[0] != 1 or cfg.patch[1] != cfg.patch[2]:
        wrong.append(f"patch = {cfg.patch} (needs (1, p, p): DiT patches single frames, square)")
    if cfg.kv_heads != cfg.num_heads:
        wrong.append(f"num_kv_heads = {cfg.num_kv_heads} (needs num_heads: no GQA)")
    if not cfg.num_classes:
        wrong.append("num_classes = 0 (needs > 0: DiT is class-conditional)")
    if wrong:
        raise AdapterConfigError(f"this dit config cannot be written as {target}: " + "; ".join(wrong))


_DIT_LIKE = {"norm": "layer", "mlp": "gelu", "mlp_ratio": 4.0, "qk_norm": False, "pos_embed": "sincos2d",
             "adaln_lora_rank": 0, "text_dim": 0}


def _vfm_options(in_channels: int, out_channels: int, patch: int, hidden: int, depth: int, heads: int,
                 num_classes: int, **extra: Any) -> dict[str, Any]:
    return {
        "in_channels": in_channels, "out_channels": None if out_channels == in_channels else out_channels,
        "patch": [1, patch, patch], "hidden": hidden, "depth": depth, "num_heads": heads,
        "num_classes": num_classes, **{k: v for k, v in _DIT_LIKE.items() if k != "text_dim"}, **extra,
    }


# --- diffusers ----------------------------------------------------------------------------------

class DiffusersDiT(StateDictAdapter):
    """diffusers ``DiTTransformer2DModel`` (config.json + diffusion_pytorch_model.safetensors)."""

    name = "diffusers-dit"
    family = "dit"
    diffusers_class = "DiTTransformer2DModel"

    #: config.json fields vfm's dit computes one way only: the value it needs.
    FIXED = {"norm_type": "ada_norm_zero", "activation_fn": "gelu-approximate", "attention_bias": True,
             "norm_elementwise_affine": False}

    def accepts_class(self, class_name: str | None, external_config: Mapping[str, Any]) -> bool:
        """Also the legacy ``Transformer2DModel`` configs of DiT pipelines saved before diffusers 0.28
        (diffusers itself maps those to DiTTransformer2DModel): adaLN-Zero with a patch size."""
        legacy = (class_name == "Transformer2DModel" and external_config.get("norm_type") == "ada_norm_zero"
                  and external_config.get("patch_size") is not None)
        return class_name == self.diffusers_class or legacy

    def options_from_external(self, external_config: dict) -> dict:
        c = {"in_channels": 4, "out_channels": None, "num_layers": 28, "patch_size": 2, "num_attention_heads": 16,
             "attention_head_dim": 72, "num_embeds_ada_norm": 1000, "norm_eps": 1e-5, "dropout": 0.0,
             **self.FIXED, **external_config}
        wrong = [f"{k} = {c[k]!r} (vfm's dit needs {v!r})" for k, v in self.FIXED.items() if c[k] != v]
        if c["dropout"]:
            wrong.append(f"dropout = {c['dropout']} (vfm's dit has no dropout; needs 0)")
        if c.get("cross_attention_dim") is not None:  # a legacy Transformer2DModel with text cross-attention
            wrong.append(f"cross_attention_dim = {c['cross_attention_dim']} (DiT has no cross-attention; needs null)")
        if not c["num_embeds_ada_norm"]:
            wrong.append("num_embeds_ada_norm unset (needs the number of classes)")
        if wrong:
            raise AdapterConfigError(f"{self.diffusers_class} config fields vfm cannot convert: " + "; ".join(wrong))
        heads, head_dim = int(c["num_attention_heads"]), int(c["attention_head_dim"])
        in_ch = int(c["in_channels"])
        return _vfm_options(in_ch, int(c["out_channels"] or in_ch), int(c["patch_size"]), heads * head_dim,
                            int(c["num_layers"]), heads, int(c["num_embeds_ada_norm"]),
                            timestep_freq_shift=1, mlp_norm_eps=float(c["norm_eps"]))

    def options_to_external(self, options: dict) -> dict:
        _check_expressible(options, {**_DIT_LIKE, "timestep_freq_shift": 1}, f"a diffusers {self.diffusers_class}")
        o = _filled(options)
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
        o = _filled(options)
        depth = o["depth"]
        ext = self._names(depth)
        expected = _expected_vfm(options)
        ext_expected = {v: expected[k] for k, v in ext.items()}
        ext_expected["pos_embed.proj.weight"] = (o["hidden"], o["in_channels"], o["patch"][1], o["patch"][2])
        check_keys(ext_expected, self._block0_only(state_dict, depth), f"this {self.diffusers_class} state dict (vfm dit {_size(o)})")
        self._check_shared_embedders(state_dict, depth)
        out = {k: state_dict[v] for k, v in ext.items() if k != "x_embedder.proj.weight"}
        out["x_embedder.proj.weight"] = conv_to_linear(state_dict["pos_embed.proj.weight"])
        return out

    def to_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        o = _filled(options)
        check_keys(_expected_vfm(options), state_dict, f"this vfm dit state dict ({_size(o)})")
        ext = self._names(o["depth"])
        out = {v: state_dict[k] for k, v in ext.items() if k != "x_embedder.proj.weight"}
        out["pos_embed.proj.weight"] = linear_to_conv(state_dict["x_embedder.proj.weight"], o["in_channels"], o["patch"][1])
        for i in range(1, o["depth"]):  # diffusers keeps a copy of the embedders in every block
            for vfm_name, ext_name in _DIFFUSERS_EMBEDDERS.items():
                for suffix in (".weight", ".bias"):
                    if vfm_name + suffix in state_dict:
                        out[_EMB.format(i=i) + ext_name + suffix] = state_dict[vfm_name + suffix].clone()
        return out

    @staticmethod
    def _names(depth: int) -> dict[str, str]:
        """vfm name -> diffusers name for every tensor but block 1.. embedder copies."""
        names = {"x_embedder.proj.weight": "pos_embed.proj.weight", "x_embedder.proj.bias": "pos_embed.proj.bias",
                 "final_layer.adaln.linear.weight": "proj_out_1.weight", "final_layer.adaln.linear.bias": "proj_out_1.bias",
                 "final_layer.linear.weight": "proj_out_2.weight", "final_layer.linear.bias": "proj_out_2.bias"}
        for vfm_name, ext_name in _DIFFUSERS_EMBEDDERS.items():
            names[vfm_name + ".weight"] = _EMB.format(i=0) + ext_name + ".weight"
            if not vfm_name.startswith("y_"):
                names[vfm_name + ".bias"] = _EMB.format(i=0) + ext_name + ".bias"
        for i in range(depth):
            for vfm_name, ext_name in _BLOCK_NAMES["diffusers"].items():
                for suffix in (".weight", ".bias"):
                    names[f"blocks.{i}.{vfm_name}{suffix}"] = f"transformer_blocks.{i}.{ext_name}{suffix}"
        return names

    @staticmethod
    def _block0_only(state: Mapping[str, torch.Tensor], depth: int) -> dict[str, torch.Tensor]:
        """``state`` without the embedder copies of blocks 1.. (checked equal to block 0's already)."""
        copies = tuple(_EMB.format(i=i) for i in range(1, depth))
        return {k: v for k, v in state.items() if not k.startswith(copies)}

    def _check_shared_embedders(self, state: Mapping[str, torch.Tensor], depth: int) -> None:
        """vfm's dit has one timestep and class embedder; diffusers' converter writes the same copy into
        every block, and a checkpoint whose copies differ cannot be represented: refuse it by name."""
        differing = []
        for i in range(1, depth):
            for key in state:
                if key.startswith(_EMB.format(i=0)):
                    other = _EMB.format(i=i) + key[len(_EMB.format(i=0)):]
                    if other in state and not torch.equal(state[other], state[key]):
                        differing.append(other)
        if differing:
            raise AdapterConfigError(
                f"vfm's dit shares one timestep and class embedder across blocks, but this {self.diffusers_class} "
                f"has different ones in {len(differing)} tensors ({', '.join(differing[:4])}...); checkpoints "
                "converted from DiT hold identical copies")


# --- facebookresearch/DiT -----------------------------------------------------------------------

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
                  "depth": _depth(state_dict, "blocks."), "num_classes": state_dict["y_embedder.embedding_table.weight"].shape[0] - 1,
                  "learn_sigma": out == 2 * channels}
        if hidden in DIT_HEADS:
            config["num_heads"] = DIT_HEADS[hidden]
        return config

    def options_from_external(self, external_config: dict) -> dict:
        c = {"patch_size": 2, "in_channels": 4, "hidden_size": 1152, "depth": 28, "num_classes": 1000,
             "learn_sigma": True, **external_config}
        heads = c.get("num_heads") or DIT_HEADS.get(int(c["hidden_size"]))
        if heads is None:
            raise AdapterConfigError(f"hidden_size {c['hidden_size']} is none of DiT's sizes ({', '.join(map(str, DIT_HEADS))}); "
                                     "give num_heads (vfm convert --set num_heads=N)")
        in_ch = int(c["in_channels"])
        return _vfm_options(in_ch, 2 * in_ch if c["learn_sigma"] else in_ch, int(c["patch_size"]), int(c["hidden_size"]),
                            int(c["depth"]), int(heads), int(c["num_classes"]))

    def options_to_external(self, options: dict) -> dict:
        _check_expressible(options, {**_DIT_LIKE, "timestep_freq_shift": 0, "mlp_norm_eps": 1e-6}, "a facebookresearch/DiT")
        o = _filled(options)
        if "input_size" not in options:
            raise AdapterConfigError("facebookresearch/DiT's config needs input_size (the latent side): pass it in the options")
        return {"input_size": int(options["input_size"]), "patch_size": int(o["patch"][1]), "in_channels": o["in_channels"],
                "hidden_size": o["hidden"], "depth": o["depth"], "num_heads": o["num_heads"],
                "num_classes": o["num_classes"], "learn_sigma": bool(o["out_channels"])}

    def meta_from_external(self, external_config: dict) -> dict[str, Any]:
        size = int(external_config.get("input_size", 32))
        return {"latent_shape": [int(external_config.get("in_channels", 4)), 1, size, size], **DIT_META}

    def external_from_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        shape = meta.get("latent_shape") or [0, 0, 0, 0]
        return {"input_size": int(shape[2])}

    def from_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        o = _filled(options)
        expected = _expected_vfm(options)
        names = self._names(o["depth"])
        ext_expected = {v: expected[k] for k, v in names.items() if not k.startswith(("blocks.", "x_embedder.proj.weight"))}
        D = o["hidden"]
        ext_expected["x_embedder.proj.weight"] = (D, o["in_channels"], o["patch"][1], o["patch"][2])
        for i in range(o["depth"]):
            ext_expected |= {f"blocks.{i}.attn.qkv.weight": (3 * D, D), f"blocks.{i}.attn.qkv.bias": (3 * D,)}
            ext_expected |= {v: expected[k] for k, v in names.items() if k.startswith(f"blocks.{i}.")}
        if "pos_embed" in state_dict:
            ext_expected["pos_embed"] = (1, state_dict["pos_embed"].shape[1], D)
        check_keys(ext_expected, state_dict, f"this facebookresearch/DiT state dict (vfm dit {_size(o)})")
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

        o = _filled(options)
        check_keys(_expected_vfm(options), state_dict, f"this vfm dit state dict ({_size(o)})")
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
        names = {"x_embedder.proj.weight": "x_embedder.proj.weight", "x_embedder.proj.bias": "x_embedder.proj.bias"}
        for vfm_name, ext_name in _FACEBOOK_TOP.items():
            names[vfm_name + ".weight"] = ext_name + ".weight"
            if not vfm_name.startswith("y_"):
                names[vfm_name + ".bias"] = ext_name + ".bias"
        for i in range(depth):
            for vfm_name, ext_name in _BLOCK_NAMES["facebookresearch"].items():
                for suffix in (".weight", ".bias"):
                    names[f"blocks.{i}.{vfm_name}{suffix}"] = f"blocks.{i}.{ext_name}{suffix}"
        return names

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


def _filled(options: Mapping[str, Any]) -> dict[str, Any]:
    """The vfm options with the dit config's defaults filled in (as plain values)."""
    import dataclasses

    import vfm_models

    cfg = vfm_models.get_family("dit").config(**_tuple_patch(options))
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def _size(o: Mapping[str, Any]) -> str:
    return f"hidden {o['hidden']}, depth {o['depth']}, patch {tuple(o['patch'])}, in/out channels {o['in_channels']}/{o['out_channels'] or o['in_channels']}"


DIFFUSERS_DIT = DiffusersDiT()
FACEBOOKRESEARCH_DIT = FacebookResearchDiT()
