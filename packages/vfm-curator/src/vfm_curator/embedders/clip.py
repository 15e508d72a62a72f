"""A CLIP-style image (and text) embedder loaded from a local folder through ``transformers``.

Any checkpoint that ``transformers.CLIPModel`` or ``SiglipModel`` (with its image processor) can
load from a local path works; nothing is downloaded. A video clip is embedded frame by frame by the
caller. :meth:`ClipEmbedder.embed_text` puts captions in the same space (caption QA); it needs the
checkpoint's tokenizer, which image-only use does not.

``device``/``dtype`` (also the VLM captioner's): ``"auto"`` is CUDA in bf16 when a CUDA device is
visible, else the CPU in fp32 (as before); :func:`resolve_device` and :func:`resolve_dtype` say which.
"""

from __future__ import annotations

import os

import numpy as np

from vfm_curator.embedders import normalize


DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "bf16", "fp32")


def check_device(device: str, dtype: str = "auto", *, who: str) -> None:
    """``ValueError`` naming a ``device`` or ``dtype`` outside the accepted ones (cheap, no torch)."""
    if not isinstance(device, str) or not (device in DEVICES or device.startswith("cuda:")):
        raise ValueError(f"{who}: device = {device!r}; accepted: {', '.join(DEVICES)} (or cuda:N)")
    if dtype not in DTYPES:
        raise ValueError(f"{who}: dtype = {dtype!r}; accepted: {', '.join(DTYPES)}")


def cuda_visible() -> bool:
    """Whether torch sees a CUDA device here (False when torch is not installed)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_device(device: str, *, who: str = "device") -> str:
    """``auto`` -> ``cuda`` when a CUDA device is visible, else ``cpu``; ``cuda`` without one is an error."""
    check_device(device, who=who)
    if device == "auto":
        return "cuda" if cuda_visible() else "cpu"
    if device.startswith("cuda") and not cuda_visible():
        raise ValueError(f"{who}: device = {device!r} but no CUDA device is visible here; use device = 'auto' or 'cpu'")
    return device


def uses_cuda(device: str) -> bool:
    """Whether ``device`` (before resolving) runs on CUDA here: the stages declare a GPU share then."""
    return isinstance(device, str) and (device.startswith("cuda") or (device == "auto" and cuda_visible()))


def resolve_dtype(dtype: str, device: str):
    """``auto`` -> bf16 on CUDA, fp32 on the CPU; ``bf16``/``fp32`` as named (a ``torch.dtype``)."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


class ClipEmbedder:
    """``ClipEmbedder(model_path, device="auto", dtype="auto", batch_size=16)``: image features of
    CLIP's (or SigLIP's) vision tower, projected and L2-normalised, ``batch_size`` frames per forward.
    ``device``/``dtype``: ``auto`` is CUDA + bf16 when a CUDA device is visible, else CPU + fp32;
    the embeddings are float32 unit vectors either way."""

    def __init__(self, model_path: str, device: str = "auto", batch_size: int = 16, dtype: str = "auto") -> None:
        check_device(device, dtype, who="clip embedder")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"clip embedder: batch_size = {batch_size!r}; accepted: an integer >= 1")
        if not model_path or not os.path.isdir(model_path):
            raise ValueError(f"clip embedder: model_path must be a local folder saved by transformers, got {model_path!r}")
        from transformers import AutoConfig, AutoImageProcessor, CLIPImageProcessor, CLIPModel, SiglipModel

        device = resolve_device(device, who="clip embedder")
        self.device, self.dtype = device, resolve_dtype(dtype, device)
        self.model_path = model_path
        kind = AutoConfig.from_pretrained(model_path).model_type
        if kind == "clip":
            self.model = CLIPModel.from_pretrained(model_path).to(device, self.dtype).eval()
            self.processor = CLIPImageProcessor.from_pretrained(model_path)
        elif kind == "siglip":
            self.model = SiglipModel.from_pretrained(model_path).to(device, self.dtype).eval()
            self.processor = AutoImageProcessor.from_pretrained(model_path)
        else:
            raise ValueError(f"clip embedder: {model_path} holds a {kind!r} model; accepted: a 'clip' or 'siglip' checkpoint")
        self.kind = kind
        self.batch_size = int(batch_size)
        self.dim = int(getattr(self.model.config, "projection_dim", 0) or self.model.config.vision_config.hidden_size)
        self._tokenizer = None

    def embed(self, frames: np.ndarray) -> np.ndarray:
        import torch

        out = []
        with torch.inference_mode():
            for i in range(0, len(frames), self.batch_size):
                batch = [f for f in frames[i : i + self.batch_size]]
                pixels = self.processor(images=batch, return_tensors="pt")["pixel_values"].to(self.device, self.dtype)
                feats = _pooled(self.model.get_image_features(pixel_values=pixels))  # (B, dim)
                out.append(feats.float().cpu().numpy())
        return normalize(np.concatenate(out) if out else np.zeros((0, self.dim), np.float32))

    def embed_text(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` unit vectors of the text tower, comparable with :meth:`embed`'s."""
        import torch

        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(self.model_path)
            except (OSError, ValueError, TypeError) as exc:
                raise ValueError(f"clip embedder: {self.model_path} has no tokenizer, which text embeddings need "
                                 f"(save the checkpoint's tokenizer with it): {exc}") from exc
        length = int(self.model.config.text_config.max_position_embeddings)
        # SigLIP was trained on text padded to its full length; CLIP pools at the end token either way
        padding = "max_length" if self.kind == "siglip" else True
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                tokens = self._tokenizer(list(texts[i : i + self.batch_size]), padding=padding, truncation=True,
                                         max_length=length, return_tensors="pt")
                inputs = {"input_ids": tokens["input_ids"].to(self.device)}
                if self.kind == "clip" and "attention_mask" in tokens:
                    inputs["attention_mask"] = tokens["attention_mask"].to(self.device)
                feats = _pooled(self.model.get_text_features(**inputs))
                out.append(feats.float().cpu().numpy())
        return normalize(np.concatenate(out) if out else np.zeros((0, self.dim), np.float32))


def _pooled(output):
    """``get_*_features`` returns the projected features (transformers 4) or an output whose
    ``pooler_output`` holds them (transformers 5)."""
    return output if hasattr(output, "shape") else output.pooler_output
