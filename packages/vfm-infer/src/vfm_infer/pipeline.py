"""Text (or class) to video: noise -> sampler with guidance -> latents -> decoded pixels.

Everything that can be wrong with a request (an export that does not match its config, a size the
tokenizer or the model cannot take, an unknown sampler or one for another formulation) is checked
by :meth:`VideoPipeline.prepare` before any denoising starts.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from vfm_infer.conditioning import Conditioner, load_text_encoder
from vfm_infer.decode import decode
from vfm_infer.guidance import cfg_parallel, classifier_free, default_scale
from vfm_infer.samplers.base import Sampler, StepCallback

#: The sampler used when none is named, per formulation.
DEFAULT_SAMPLERS = {"edm": "edm-heun", "rectified-flow": "flow-euler"}


class ExportError(ValueError):
    """An inference export that is missing, malformed or does not match its model config."""


@dataclass(frozen=True)
class GenerationSpec:
    """What to generate; ``frames``/``size`` default to the shape of the training data."""

    sampler: str | None = None
    steps: int = 32
    guidance: float | None = None  # None: the export's default (vfm_infer.guidance.default_scale)
    seed: int = 0
    frames: int | None = None
    size: tuple[int, int] | None = None  # (H, W) in pixels
    negative_prompt: str = ""
    sampler_options: Mapping[str, Any] = field(default_factory=dict)
    decode_chunk_frames: int | None = None
    decode_tile: int | None = None


@dataclass(frozen=True)
class Prepared:
    """A checked request: the sampler instance and the latent shape (C', T', H', W') to sample."""

    sampler: Sampler
    latent_shape: tuple[int, int, int, int]
    spec: GenerationSpec


@dataclass
class ParallelLayout:
    """How ranks share the work: ``cfg_group`` (2 ranks: conditional / unconditional branch) and
    ``model`` (a context-parallel callable replacing the model's forward), either or both."""

    cfg_group: Any = None
    model: Callable | None = None


class VideoPipeline:
    def __init__(self, model, meta: Mapping[str, Any], *, device: str | torch.device = "cpu",
                 parallel: ParallelLayout | None = None) -> None:
        import vfm_models

        missing = [k for k in ("formulation", "tokenizer", "latent_shape") if not meta.get(k)]
        if missing:
            raise ExportError(f"the export's config.json lacks {', '.join(missing)}; generation needs the "
                              "formulation, the tokenizer and the latent_shape of the training data")
        self.meta = dict(meta)
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.formulation = vfm_models.get_formulation(meta["formulation"])(**(meta.get("formulation_options") or {}))
        self.tokenizer = vfm_models.get_tokenizer(meta["tokenizer"])(**(meta.get("tokenizer_options") or {}))
        self.conditioner = Conditioner(model.config, load_text_encoder(meta, self.device), self.device,
                                       null=meta.get("null_condition"))
        self.parallel = parallel or ParallelLayout()

    @classmethod
    def from_export(cls, folder: str | Path, **kwargs: Any) -> "VideoPipeline":
        """Load an inference export folder (``model.safetensors`` + ``config.json``)."""
        folder = Path(folder)
        missing = [n for n in ("model.safetensors", "config.json") if not (folder / n).is_file()]
        if missing:
            raise ExportError(f"{folder} is not an inference export: missing {', '.join(missing)} "
                              "(expected a folder with model.safetensors and config.json)")
        from vfm_models.export import load_export

        try:
            model, meta = load_export(folder)
        except Exception as exc:  # noqa: BLE001 - any loading failure is reported as a bad export
            raise ExportError(f"checkpoint {folder} does not match its model config: {exc}") from exc
        return cls(model, meta, **kwargs)

    # --- checks ----------------------------------------------------------------------------------

    def make_sampler(self, name: str | None, steps: int, options: Mapping[str, Any]) -> Sampler:
        """The named sampler for this export's formulation, with the formulation's schedule options."""
        from vfm_infer.plugins import host

        formulation = self.meta["formulation"]
        name = name or DEFAULT_SAMPLERS.get(formulation)
        if name is None:
            raise ValueError(f"no default sampler for formulation {formulation!r}; name one with --sampler")
        cls = host.get("samplers", name)
        if cls.formulation != formulation:
            fitting = sorted(n for n in host.names("samplers") if getattr(host.get("samplers", n), "formulation", None) == formulation)
            raise ValueError(f"sampler {name!r} samples {cls.formulation!r} but this model was trained with "
                             f"{formulation!r}; use one of: {', '.join(fitting)}")
        accepted = inspect.signature(cls).parameters
        defaults = {k: v for k, v in self.formulation.options().items() if k in accepted and k != "steps"}
        return cls(steps, **{**defaults, **options})

    def latent_shape(self, frames: int | None, size: tuple[int, int] | None) -> tuple[int, int, int, int]:
        """(C', T', H', W') for a pixel request, checked against the tokenizer and the model's patch."""
        c_lat, t_lat, h_lat, w_lat = (int(v) for v in self.meta["latent_shape"])
        tok, cfg = self.tokenizer, self.model.config
        channels = getattr(tok, "channels", 3)
        if frames is not None or size is not None:
            f = frames if frames is not None else self._default_frames(t_lat, channels)
            h, w = size if size is not None else (h_lat * tok.spatial_compression, w_lat * tok.spatial_compression)
            if min(f, h, w) < 1:
                raise ValueError(f"frames and size must be positive; got {f} frames at {h}x{w}")
            try:
                c_lat, t_lat, h_lat, w_lat = tok.latent_shape((channels, f, h, w))
            except ValueError as exc:
                raise ValueError(f"the {self.meta['tokenizer']!r} tokenizer cannot take {f} frames at {h}x{w}: {exc}") from None
        if c_lat != cfg.in_channels:
            raise ValueError(f"the tokenizer gives {c_lat} latent channels but the model takes {cfg.in_channels}")
        pt, ph, pw = cfg.patch
        if t_lat % pt or h_lat % ph or w_lat % pw:
            sc = tok.spatial_compression
            raise ValueError(
                f"latent {t_lat}x{h_lat}x{w_lat} (T'xH'xW') is not divisible by the model's patch {pt}x{ph}x{pw}; "
                f"accepted pixel sizes are multiples of {sc * ph}x{sc * pw}")
        h_pix, w_pix = h_lat * tok.spatial_compression, w_lat * tok.spatial_compression
        if h_pix % 2 or w_pix % 2:
            raise ValueError(f"H264 output needs an even height and width; the video would be {h_pix}x{w_pix}")
        return c_lat, t_lat, h_lat, w_lat

    def _default_frames(self, t_lat: int, channels: int) -> int:
        """The fewest pixel frames the tokenizer turns into ``t_lat`` latent frames."""
        sc = self.tokenizer.spatial_compression
        for f in range(1, t_lat * self.tokenizer.temporal_compression + 2):
            try:
                if self.tokenizer.latent_shape((channels, f, sc, sc))[1] == t_lat:
                    return f
            except ValueError:
                continue
        raise ValueError(f"cannot find a frame count that the tokenizer maps to {t_lat} latent frames; pass frames")

    def prepare(self, spec: GenerationSpec, prompts: Sequence[str]) -> Prepared:
        """Check the whole request before any work; raises ValueError naming what is wrong."""
        if not prompts:
            raise ValueError("no prompts given")
        sampler = self.make_sampler(spec.sampler, spec.steps, spec.sampler_options)
        shape = self.latent_shape(spec.frames, spec.size)
        for p in prompts:
            self.conditioner.check(p, spec.negative_prompt)
        if spec.guidance is None:
            spec = dataclasses.replace(spec, guidance=default_scale(self.meta))
        if self.parallel.cfg_group is not None and self.conditioner.kind == "none":
            raise ValueError("CFG-parallel needs a conditional model; this one is unconditional")
        return Prepared(sampler, shape, spec)

    # --- generation ------------------------------------------------------------------------------

    def _net(self):
        model = self.parallel.model or self.model
        return lambda x, level, cond: self.formulation.denoise(model, x, level, cond)

    def sample_latent(self, prepared: Prepared, prompt: str, *, index: int = 0,
                      callback: StepCallback | None = None) -> torch.Tensor:
        """Latent (1, C', T', H', W') for ``prompt``; noise is seeded by ``seed + index`` (the same on
        every rank, so parallel ranks step the same latents)."""
        spec = prepared.spec
        cond, uncond = self.conditioner(prompt, spec.negative_prompt)
        if self.parallel.cfg_group is not None:
            denoiser = cfg_parallel(self._net(), cond, uncond, spec.guidance, self.parallel.cfg_group)
        else:
            denoiser = classifier_free(self._net(), cond, uncond, spec.guidance)
        generator = torch.Generator().manual_seed(spec.seed + index)
        noise = torch.randn((1, *prepared.latent_shape), generator=generator).to(self.device)
        with torch.inference_mode():
            return prepared.sampler.sample(denoiser, noise, generator=generator, callback=callback)

    def decode(self, latent: torch.Tensor, spec: GenerationSpec) -> torch.Tensor:
        """Pixels (C, T, H, W) in [-1, 1] from a latent (1, C', T', H', W')."""
        with torch.inference_mode():
            video = decode(self.tokenizer, latent, chunk_frames=spec.decode_chunk_frames, tile=spec.decode_tile)
        return video[0].clamp(-1, 1)

    def generate(self, prompt: str, spec: GenerationSpec | None = None, *, index: int = 0,
                 callback: StepCallback | None = None) -> torch.Tensor:
        """One video (C, T, H, W) in [-1, 1]."""
        spec = spec or GenerationSpec()
        prepared = self.prepare(spec, [prompt])
        return self.decode(self.sample_latent(prepared, prompt, index=index, callback=callback), spec)
