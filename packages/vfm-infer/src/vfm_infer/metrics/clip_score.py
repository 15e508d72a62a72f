"""``clip-score``: how well each video's frames match its prompt, by a CLIP (or SigLIP) model from a local folder.

Per frame, the CLIPScore of torchmetrics (``100 * max(cos(E_image, E_text), 0)``; Hessel et al. 2021 scale
the same clipped cosine by 2.5 instead), and per video its mean over the frames (all, or ``frames`` evenly
spaced): the CLIPSIM of text-to-video papers. The summary is the mean over the videos.

Frames are prepared in torch, batched on the model's device, the way the folder's own image processor
prepares an image: resize (its ``size``, shortest edge or height x width, with its resampling filter,
antialiased as PIL is), rounding to uint8 as PIL does, center crop, rescale and normalize with its
mean and std. The model is transformers' own class for the folder's ``model_type`` (``clip``,
``siglip``); a folder whose config names code of its own is refused (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from vfm_plugins.spacing import evenly_spaced

from vfm_infer.metrics.base import EvalItem, Metric, MetricResult

#: model types whose image/text embeddings this metric reads (get_image_features / get_text_features)
MODEL_TYPES = ("clip", "siglip")
#: PIL resampling codes in a processor config -> torch interpolation modes
RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}
ACCEPTED = "a local folder of a transformers CLIP or SigLIP model (config.json, weights, tokenizer, preprocessor_config.json)"


def pil_nearest(n_in: int, n_out: int) -> np.ndarray:
    """The source pixel of each of ``n_out`` pixels in PIL's nearest resize (ImagingScaleAffine): the one under
    the output pixel's centre, that centre summed up in float64 from ``scale / 2`` a ``scale`` at a time, as PIL
    sums it (torch's "nearest" takes ``floor(i * scale)``, a half pixel early; "nearest-exact" multiplies, and
    differs from the sum where a centre falls on a pixel edge: whole columns off)."""
    scale = n_in / n_out
    centres = np.add.accumulate(np.r_[scale * 0.5, np.full(n_out - 1, scale)])
    return np.minimum(centres.astype(np.int64), n_in - 1)


class ImagePreprocess:
    """A transformers image processor's resize / crop / rescale / normalize, on a batch of uint8 frames in torch."""

    def __init__(self, processor: Any) -> None:
        size = dict(processor.size) if getattr(processor, "do_resize", True) else None
        self.shortest_edge = size.get("shortest_edge") if size else None
        self.resize_to = (size["height"], size["width"]) if size and "height" in size else None
        if size and self.shortest_edge is None and self.resize_to is None:
            raise ValueError(f"clip-score: the image processor's size {size} is neither shortest_edge nor height/width")
        resample = int(getattr(processor, "resample", 3))
        if resample not in RESAMPLE:
            raise ValueError(f"clip-score: the image processor's resample = {resample} (a PIL filter) is not supported; "
                             f"accepted: {', '.join(f'{k} ({v})' for k, v in RESAMPLE.items())}")
        self.mode = RESAMPLE[resample]
        crop = dict(processor.crop_size) if getattr(processor, "do_center_crop", False) else None
        self.crop = (crop["height"], crop["width"]) if crop else None
        self.scale = float(processor.rescale_factor) if getattr(processor, "do_rescale", True) else 1.0
        normalize = getattr(processor, "do_normalize", True)
        self.mean = list(processor.image_mean) if normalize else [0.0, 0.0, 0.0]
        self.std = list(processor.image_std) if normalize else [1.0, 1.0, 1.0]

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """(H, W) after the resize, as transformers' get_resize_output_image_size computes it."""
        if self.resize_to is not None:
            return self.resize_to
        if self.shortest_edge is None:
            return height, width
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.shortest_edge, int(self.shortest_edge * long / short)
        return (new_long, new_short) if width <= height else (new_short, new_long)

    def __call__(self, frames):
        """(N, H, W, 3) uint8 tensor -> (N, 3, h, w) float32 pixel values."""
        import torch
        import torch.nn.functional as F

        x = frames.permute(0, 3, 1, 2).float()
        height, width = x.shape[-2:]
        size = self.output_size(height, width)
        if size != (height, width) and self.mode == "nearest":
            rows, columns = (torch.as_tensor(pil_nearest(n, m), device=x.device) for n, m in zip((height, width), size))
            x = x[..., rows, :][..., columns]
        elif size != (height, width):
            # As PIL resizes a uint8 image: a horizontal pass, then a vertical one, each rounded to uint8
            # (bicubic overshoot is clipped in between), with the filter spread over the source pixels on a
            # downscale (antialias; torch's antialiased bicubic is PIL's a = -0.5 kernel).
            extra = {"align_corners": False, "antialias": True}
            for step in ((height, size[1]), size):
                if tuple(x.shape[-2:]) != step:
                    x = F.interpolate(x, size=step, mode=self.mode, **extra).round().clamp(0, 255)
        if self.crop is not None:
            ch, cw = self.crop
            h, w = x.shape[-2:]
            if ch > h or cw > w:
                raise ValueError(f"clip-score: frames of {h}x{w} after the resize are smaller than the crop {ch}x{cw}")
            top, left = (h - ch) // 2, (w - cw) // 2
            x = x[..., top:top + ch, left:left + cw]
        mean = torch.tensor(self.mean, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=x.device).view(1, 3, 1, 1)
        return (x * self.scale - mean) / std


def _embedding(output):
    """get_*_features returns the projected embedding, or (transformers 5) an output holding it as pooler_output."""
    return output if hasattr(output, "dim") else output.pooler_output


class CLIPScore(Metric):
    """Per video, the mean CLIPScore (100 * max(cos, 0)) of its frames against its prompt.

    Options: ``model`` (required: a local CLIP / SigLIP folder), ``frames`` (frames per video, evenly
    spaced; default all), ``batch_size`` (frames per forward pass), ``device`` (``auto``: CUDA when
    present, else CPU), ``dtype`` (``auto``: bf16 on CUDA, float32 on the CPU; or ``bf16``, ``fp32``).
    """

    name = "clip-score"
    columns = ("prompt", "clip_score", "frames")

    def __init__(self, model: str | None = None, frames: int | None = None, batch_size: int = 32,
                 device: str = "auto", dtype: str = "auto") -> None:
        if model is None or str(model) == "":
            raise ValueError(f"metric 'clip-score' needs the option model: {ACCEPTED} (--option clip-score.model=PATH)")
        folder = Path(str(model)).expanduser()
        if not (folder / "config.json").is_file():
            raise ValueError(f"clip-score.model = {str(model)!r} " + ("has no config.json" if folder.is_dir() else
                             "is not a folder") + f"; accepted: {ACCEPTED}")
        if not any(folder.glob("*.safetensors")):  # a pytorch_model.bin is a pickle (docs/security.md)
            raise ValueError(f"clip-score.model = {str(model)!r} holds no .safetensors weights (pickled .bin weights are not "
                             "loaded); accepted: " + ACCEPTED + "; re-save a .bin folder once with "
                             "model.save_pretrained(folder, safe_serialization=True)")
        for key, value, lo in (("frames", frames, 1), ("batch_size", batch_size, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < lo):
                raise ValueError(f"clip-score.{key} = {value!r}; accepted: an integer >= {lo}")
        if not isinstance(device, str) or not (device in ("auto", "cpu") or device.startswith("cuda")):
            raise ValueError(f"clip-score.device = {device!r}; accepted: auto, cpu, cuda, cuda:N")
        if dtype not in ("auto", "bf16", "fp32"):
            raise ValueError(f"clip-score.dtype = {dtype!r}; accepted: auto, bf16, fp32")
        self.folder, self.frames, self.batch_size = folder, frames, batch_size
        self.device_name, self.dtype_name = device, dtype
        self.model = None

    def load(self) -> None:
        """The model, tokenizer and preprocessing from the folder (once)."""
        import torch

        from vfm_models.text_encoders.hf import import_transformers, no_progress_bar, refuse_custom_code

        tf = import_transformers("the clip-score metric", "vfm-infer[metrics]")
        refuse_custom_code(self.folder)
        config = tf.AutoConfig.from_pretrained(self.folder, local_files_only=True, trust_remote_code=False)
        if config.model_type not in MODEL_TYPES:
            raise ValueError(f"clip-score.model = {str(self.folder)!r} holds a {config.model_type!r} model; "
                             f"accepted: {ACCEPTED} (model_type {' or '.join(MODEL_TYPES)})")
        device = self.device_name
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}.get(
            self.dtype_name, torch.bfloat16 if device.startswith("cuda") else torch.float32)
        dtype_key = "dtype" if int(tf.__version__.split(".")[0]) >= 5 else "torch_dtype"
        verbosity = tf.utils.logging.get_verbosity()
        tf.utils.logging.set_verbosity_error()  # "requires torchvision ... falling back to the PIL processor": we only read its settings
        try:
            with no_progress_bar(tf):
                self.model = tf.AutoModel.from_pretrained(self.folder, local_files_only=True, trust_remote_code=False,
                                                          use_safetensors=True, **{dtype_key: dtype}).to(device).eval()
            self.tokenizer = tf.AutoTokenizer.from_pretrained(self.folder, local_files_only=True, trust_remote_code=False)
            processor = tf.AutoImageProcessor.from_pretrained(self.folder, local_files_only=True, trust_remote_code=False)
        finally:
            tf.utils.logging.set_verbosity(verbosity)
        self.preprocess = ImagePreprocess(processor)
        self.model_type, self.device, self.dtype = config.model_type, torch.device(device), dtype
        # SigLIP was trained on texts padded to max_length; CLIP pools at the end token, padding aside
        self.max_length = int(config.text_config.max_position_embeddings)

    def text_embeddings(self, prompts: list[str]):
        """(P, D) float32 unit vectors of ``prompts``, and how many were cut at ``max_length`` tokens."""
        import torch

        padding = "max_length" if self.model_type == "siglip" else "longest"
        batch = self.tokenizer(prompts, padding=padding, truncation=True, max_length=self.max_length, return_tensors="pt")
        cut = sum(len(self.tokenizer(p, truncation=False)["input_ids"]) > self.max_length for p in prompts)
        inputs = {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        if self.model_type == "siglip":
            inputs.pop("attention_mask", None)  # SigLIP attends to its padding, as trained
        with torch.inference_mode():
            emb = _embedding(self.model.get_text_features(**inputs)).float()
        return torch.nn.functional.normalize(emb, dim=-1), cut

    def image_embeddings(self, frames: np.ndarray):
        """(N, D) float32 unit vectors of (N, H, W, 3) uint8 frames of one size, in batches."""
        import torch

        out = []
        for start in range(0, len(frames), self.batch_size):
            chunk = torch.from_numpy(np.ascontiguousarray(frames[start:start + self.batch_size])).to(self.device)
            pixels = self.preprocess(chunk).to(self.dtype)
            with torch.inference_mode():
                out.append(_embedding(self.model.get_image_features(pixel_values=pixels)).float())
        return torch.nn.functional.normalize(torch.cat(out), dim=-1)

    def evaluate(self, items: Sequence[EvalItem]) -> MetricResult:
        if self.model is None:
            self.load()
        prompts = list(dict.fromkeys(item.prompt for item in items))
        texts, cut = self.text_embeddings(prompts) if prompts else (None, 0)
        rows = []
        for item in items:
            frames = item.frames[evenly_spaced(len(item.frames), self.frames)]
            images = self.image_embeddings(frames)  # (F, D)
            cosine = images @ texts[prompts.index(item.prompt)]  # (F,)
            per_frame = 100 * cosine.clamp(min=0)
            rows.append({"prompt": item.prompt, "clip_score": float(per_frame.mean()), "frames": len(frames)})
        scores = [r["clip_score"] for r in rows]
        summary = {"clip_score": float(np.mean(scores)) if scores else None, "videos": len(rows),
                   "clip_score_std": float(np.std(scores)) if scores else None}
        notes = []
        if cut:
            notes.append(f"{cut} of {len(prompts)} prompts are longer than the model's {self.max_length} tokens and were "
                         "scored on their first tokens only")
        return MetricResult(rows, summary, notes)
