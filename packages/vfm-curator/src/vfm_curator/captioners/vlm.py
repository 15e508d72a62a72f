"""A vision-language captioner loaded from a local folder through ``transformers``.

Uses ``AutoProcessor`` + ``AutoModelForImageTextToText`` (BLIP, LLaVA, Qwen-VL... whatever the
local checkpoint is), so nothing is downloaded. The clip's middle sampled frame is captioned.
"""

from __future__ import annotations

import os

import numpy as np


class VLMCaptioner:
    """``VLMCaptioner(model_path, prompt="", max_new_tokens=30, device="cpu")``."""

    def __init__(self, model_path: str, prompt: str = "", max_new_tokens: int = 30, device: str = "cpu") -> None:
        if not model_path or not os.path.isdir(model_path):
            raise ValueError(f"vlm captioner: model_path must be a local folder saved by transformers, got {model_path!r}")
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.processor = AutoProcessor.from_pretrained(model_path)
        self.model = AutoModelForImageTextToText.from_pretrained(model_path).to(device).eval()
        self.prompt, self.max_new_tokens = prompt, int(max_new_tokens)
        #: recorded with every caption it makes (``caption_by`` in clips.parquet and the shards)
        self.provenance = {"model": model_path, **({"prompt": prompt} if prompt else {})}

    def caption(self, frames: list[np.ndarray]) -> str:
        import torch

        image = frames[len(frames) // 2]
        kwargs = {"images": image, "return_tensors": "pt"}
        if self.prompt:
            kwargs["text"] = self.prompt
        inputs = self.processor(**kwargs).to(self.device)
        with torch.inference_mode():
            ids = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        return self.processor.batch_decode(ids, skip_special_tokens=True)[0].strip()
