"""A vision-language captioner loaded from a local folder through ``transformers``.

Uses ``AutoProcessor`` + ``AutoModelForImageTextToText`` (BLIP, LLaVA, Qwen-VL... whatever the
local checkpoint is), so nothing is downloaded. The clip's middle sampled frame is captioned.
On CUDA (``device="auto"`` finds it) the model runs in bf16 and several clips are captioned per
``generate`` call; on the CPU it runs in fp32 one clip at a time, as before.
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from vfm_curator.embedders.clip import check_device, resolve_device, resolve_dtype
from vfm_curator.errors import StopRun


class VLMCaptioner:
    """``VLMCaptioner(model_path, prompt="", max_new_tokens=30, device="auto", dtype="auto",
    batch_size=None)``. ``device``/``dtype``: ``auto`` is CUDA + bf16 when a CUDA device is visible,
    else CPU + fp32. ``batch_size``: clips per ``generate`` call (default 8 on CUDA, 1 on the CPU);
    every clip of a batch has the same prompt and, batched only with frames of its own size, the
    same input length, so no padding enters greedy decoding."""

    def __init__(self, model_path: str, prompt: str = "", max_new_tokens: int = 30, device: str = "auto",
                 dtype: str = "auto", batch_size: int | None = None) -> None:
        check_device(device, dtype, who="vlm captioner")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"vlm captioner: batch_size = {batch_size!r}; accepted: an integer >= 1 (or unset)")
        if not model_path or not os.path.isdir(model_path):
            raise ValueError(f"vlm captioner: model_path must be a local folder saved by transformers, got {model_path!r}")
        from transformers import AutoModelForImageTextToText, AutoProcessor

        device = resolve_device(device, who="vlm captioner")
        self.device, self.dtype = device, resolve_dtype(dtype, device)
        self.batch_size = int(batch_size) if batch_size is not None else (8 if device.startswith("cuda") else 1)
        self.processor = AutoProcessor.from_pretrained(model_path)
        self.model = AutoModelForImageTextToText.from_pretrained(model_path).to(device, self.dtype).eval()
        self.prompt, self.max_new_tokens = prompt, int(max_new_tokens)
        #: recorded with every caption it makes (``caption_by`` in clips.parquet and the shards)
        self.provenance = {"model": model_path, **({"prompt": prompt} if prompt else {})}

    def caption(self, frames: list[np.ndarray]) -> str:
        return self._generate([frames[len(frames) // 2]])[0]

    def caption_many(self, clips: Iterable[list[np.ndarray]]) -> list:
        """Each clip's caption, or the exception its batch raised (the caption stage's interface);
        frames are read as the batches need them."""
        results: list = []
        pending: list[tuple[int, np.ndarray]] = []

        def flush() -> None:
            groups: dict[tuple, list[tuple[int, np.ndarray]]] = {}
            for i, image in pending:  # one input length per generate call: same-sized frames together
                groups.setdefault(np.shape(image), []).append((i, image))
            for group in groups.values():
                try:
                    texts = self._generate([image for _, image in group])
                except StopRun:
                    raise
                except Exception as exc:  # noqa: BLE001 - each clip of the batch gets the error
                    texts = [exc] * len(group)
                for (i, _), text in zip(group, texts):
                    results[i] = text
            pending.clear()

        for frames in clips:
            results.append(None)
            pending.append((len(results) - 1, frames[len(frames) // 2]))
            if len(pending) >= self.batch_size:
                flush()
        flush()
        return results

    def _generate(self, images: list[np.ndarray]) -> list[str]:
        import torch

        kwargs = {"images": images if len(images) > 1 else images[0], "return_tensors": "pt"}
        if self.prompt:
            kwargs["text"] = [self.prompt] * len(images) if len(images) > 1 else self.prompt
        inputs = self.processor(**kwargs).to(self.device)
        for key, value in inputs.items():  # pixel inputs in the model's dtype; token ids stay integers
            if torch.is_floating_point(value):
                inputs[key] = value.to(self.dtype)
        with torch.inference_mode():
            ids = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        return [text.strip() for text in self.processor.batch_decode(ids, skip_special_tokens=True)]
