"""A CLIP-style image (and text) embedder loaded from a local folder through ``transformers``.

Any checkpoint that ``transformers.CLIPModel`` or ``SiglipModel`` (with its image processor) can
load from a local path works; nothing is downloaded. A video clip is embedded frame by frame by the
caller. :meth:`ClipEmbedder.embed_text` puts captions in the same space (caption QA); it needs the
checkpoint's tokenizer, which image-only use does not.
"""

from __future__ import annotations

import os

import numpy as np

from vfm_curator.embedders import normalize


class ClipEmbedder:
    """``ClipEmbedder(model_path, device="cpu", batch_size=16)``: image features of CLIP's (or
    SigLIP's) vision tower, projected and L2-normalised. ``device="auto"`` picks CUDA when available."""

    def __init__(self, model_path: str, device: str = "cpu", batch_size: int = 16) -> None:
        if not model_path or not os.path.isdir(model_path):
            raise ValueError(f"clip embedder: model_path must be a local folder saved by transformers, got {model_path!r}")
        import torch
        from transformers import AutoConfig, AutoImageProcessor, CLIPImageProcessor, CLIPModel, SiglipModel

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.model_path = model_path
        kind = AutoConfig.from_pretrained(model_path).model_type
        if kind == "clip":
            self.model = CLIPModel.from_pretrained(model_path).to(device).eval()
            self.processor = CLIPImageProcessor.from_pretrained(model_path)
        elif kind == "siglip":
            self.model = SiglipModel.from_pretrained(model_path).to(device).eval()
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
                pixels = self.processor(images=batch, return_tensors="pt")["pixel_values"].to(self.device)
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
