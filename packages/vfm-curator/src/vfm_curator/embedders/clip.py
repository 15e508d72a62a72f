"""A CLIP-style image embedder loaded from a local folder through ``transformers``.

Any checkpoint that ``transformers.CLIPModel`` (and ``CLIPImageProcessor``) can load from a local
path works; nothing is downloaded. A video clip is embedded frame by frame by the caller.
"""

from __future__ import annotations

import os

import numpy as np

from vfm_curator.embedders import normalize


class ClipEmbedder:
    """``ClipEmbedder(model_path, device="cpu", batch_size=16)``: image features of CLIP's vision
    tower, projected and L2-normalised. ``device="auto"`` picks CUDA when available."""

    def __init__(self, model_path: str, device: str = "cpu", batch_size: int = 16) -> None:
        if not model_path or not os.path.isdir(model_path):
            raise ValueError(f"clip embedder: model_path must be a local folder saved by transformers, got {model_path!r}")
        import torch
        from transformers import CLIPImageProcessor, CLIPModel

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.model = CLIPModel.from_pretrained(model_path).to(device).eval()
        self.processor = CLIPImageProcessor.from_pretrained(model_path)
        self.batch_size = int(batch_size)
        self.dim = int(self.model.config.projection_dim)

    def embed(self, frames: np.ndarray) -> np.ndarray:
        import torch

        out = []
        with torch.inference_mode():
            for i in range(0, len(frames), self.batch_size):
                batch = [f for f in frames[i : i + self.batch_size]]
                pixels = self.processor(images=batch, return_tensors="pt")["pixel_values"].to(self.device)
                vision = self.model.vision_model(pixel_values=pixels)
                feats = self.model.visual_projection(vision.pooler_output)  # (B, projection_dim)
                out.append(feats.float().cpu().numpy())
        return normalize(np.concatenate(out) if out else np.zeros((0, self.dim), np.float32))
