"""What the diffusers-backed VAE tokenizers (``wan-vae``, ``sd-vae``) share: importing diffusers (an
optional dependency, with an error saying so), finding the model folder (a diffusers model folder or
a pipeline folder's ``vae/``) and loading it from safetensors only, locally, downloading nothing."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import torch

from vfm_models.dtypes import float_dtype


def autoencoder_class(tokenizer: str, class_name: str, requirement: str = "diffusers"):
    """diffusers' ``class_name``; an ImportError naming ``tokenizer`` and how to install when diffusers is missing."""
    try:
        import diffusers
        cls = getattr(diffusers, class_name)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"the {tokenizer} tokenizer needs diffusers ({class_name}, {requirement}): "
                          "pip install diffusers") from exc
    return cls


def model_folder(tokenizer: str, path: Path, class_name: str, hint: str) -> Path:
    """``path`` if it holds ``config.json``, else its ``vae/`` (a diffusers pipeline folder); it must hold safetensors."""
    if (path / "config.json").is_file():
        folder = path
    elif (path / "vae" / "config.json").is_file():
        folder = path / "vae"  # a diffusers pipeline folder
    else:
        raise FileNotFoundError(f"{tokenizer} tokenizer: {path} is not an {class_name} folder (no config.json there "
                                f"nor in vae/); give {hint}")
    if not any(folder.glob("*.safetensors")):
        others = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
        raise ValueError(f"{tokenizer} tokenizer: {folder} holds no .safetensors weights"
                         + (f" (only {', '.join(others)})" if others else "")
                         + "; vfm reads VAE weights from safetensors only (convert them with diffusers' "
                         "save_pretrained(safe_serialization=True))")
    return folder


def load_autoencoder(tokenizer: str, class_name: str, path: str | PathLike, hint: str, device: str,
                     dtype: torch.dtype | str | None, requirement: str = "diffusers"):
    """(vae in eval mode on ``device``, its folder, its dtype): from safetensors, local files only."""
    cls = autoencoder_class(tokenizer, class_name, requirement)
    folder = model_folder(tokenizer, Path(path), class_name, hint)
    dtype = float_dtype(dtype, f"{tokenizer} tokenizer") or torch.float32
    from vfm_models.export import check_folder_fits

    check_folder_fits(lambda: cls.from_config(cls.load_config(folder)), folder, f"{tokenizer} tokenizer")
    vae = cls.from_pretrained(folder, torch_dtype=dtype, use_safetensors=True, local_files_only=True)
    return vae.to(device).eval(), folder, dtype
