"""Text (or class) to video: noise -> sampler with guidance -> latents -> decoded pixels.

Everything that can be wrong with a request (an export that does not match its config or holds
non-finite weights, a size the tokenizer or the model cannot take or the device cannot hold, an
unknown sampler or one for another formulation, a non-finite guidance scale, a seed out of range)
is checked by :meth:`VideoPipeline.prepare` before any denoising starts; :func:`check_spec` checks
what needs no model, before one is loaded. A sampler that still produces inf or nan raises
:class:`NonFiniteOutputError` instead of giving a black video.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from vfm_models.dtypes import float_dtype
from vfm_models.families.plan import parallel_plan_of
from vfm_models.seeded import build_seeded
from vfm_plugins.text import counted

from vfm_infer.conditioning import Conditioner, conditioning_kind, load_text_encoder
from vfm_infer.decode import decode
from vfm_infer import memory
from vfm_infer.guidance import cfg_parallel, classifier_free, default_scale
from vfm_infer.checks import (GenerationWarning, NegativeGuidanceWarning, PromptTruncatedWarning, UnusedInputWarning,
                              UntrainedNullWarning, check_spec_types, guidance_without_contrast, negative_guidance,
                              truncated_prompts, unused_inputs, untrained_null)
from vfm_infer.samplers.base import FORMULATIONS, Sampler, StepCallback, build_sampler

#: The sampler used when none is named, per formulation.
DEFAULT_SAMPLERS = {"edm": "edm-heun", "rectified-flow": "flow-euler", "ddpm": "ddim"}


#: ``--dtype`` names -> the dtype the transformer runs in (latents and decoding stay float32): the two
#: of vfm_models.dtypes' names that inference takes, looked up there (one name table for the packages).
DTYPES = {name: float_dtype(name, "--dtype") for name in ("fp32", "bf16")}


def resolve_device(name: str | torch.device = "auto") -> torch.device:
    """``auto`` (CUDA when present, this torchrun rank's GPU), ``cuda``, ``cuda:N`` or ``cpu``."""
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise ValueError(f"unknown device {name!r}; accepted: auto, cuda, cuda:N, cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was asked for but no CUDA device is visible; use --device cpu or auto")
        if name == "cuda":  # under torchrun each rank takes its own GPU
            name = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(torch.device(name))
    return torch.device(name)


def resolve_dtype(name: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None``: bf16 on CUDA, fp32 on CPU; else one of :data:`DTYPES`."""
    if isinstance(name, torch.dtype):
        return name
    if name is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; accepted: {', '.join(DTYPES)}")
    return DTYPES[name]


class ExportError(ValueError):
    """An inference export that is missing, malformed or does not match its model config."""


class NonFiniteOutputError(ValueError):
    """The sampler or the decoder produced inf or nan values (which would write a black video)."""


class UntrainedShapeWarning(GenerationWarning):
    """A request for a frame count or size other than the training data's: the model generates it,
    but it never learnt that shape (its positions reach where training never put a token)."""


#: Seeds a torch generator takes; prompt i draws its noise with seed + i.
MAX_SEED = 2**64 - 1


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


def check_spec(spec: GenerationSpec, num_prompts: int = 1) -> None:
    """What a request can get wrong without a model: steps, guidance, seed range, decode sizes.
    Raises ValueError naming the option and what is accepted."""
    if not isinstance(spec.steps, int) or spec.steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {spec.steps!r}")
    check_spec_types(spec)
    if spec.guidance is not None and not math.isfinite(spec.guidance):
        raise ValueError(f"guidance must be a finite number (1 = off), got {spec.guidance}")
    last = spec.seed + max(num_prompts, 1) - 1
    if spec.seed < 0 or last > MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED - max(num_prompts, 1) + 1}] for {num_prompts} prompt(s) "
                         f"(prompt i uses seed + i, at most 2**64 - 1), got {spec.seed}")
    for name, value in (("decode tile", spec.decode_tile), ("decode chunk", spec.decode_chunk_frames)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1 latent {'pixels' if name.endswith('tile') else 'frames'}, got {value}")


@dataclass(frozen=True)
class Prepared:
    """A checked request: the sampler instance and the latent shape (C', T', H', W') to sample."""

    sampler: Sampler
    latent_shape: tuple[int, int, int, int]
    spec: GenerationSpec
    #: what the user should know before looking at the videos (e.g. a size the model never trained on)
    warnings: tuple[str, ...] = ()


@dataclass
class ParallelLayout:
    """How ranks share the work: ``cfg_group`` (2 ranks: conditional / unconditional branch) and
    ``model`` (a context-parallel callable replacing the model's forward), either or both."""

    cfg_group: Any = None
    model: Callable | None = None


def without_full_masks(cond: dict, uncond: dict | None) -> tuple[dict, dict | None]:
    """Drop text masks that mask nothing, checked once per video on the host: attention without a
    mask runs on the fused kernel, a boolean mask sends SDPA to its slower masked kernel (2.4x the
    cross-attention time at 8k tokens on an H100, ``benchmarks/gpu_attention.py``). Both branches
    keep their masks unless both can drop them, so they still batch together."""
    branches = [c for c in (cond, uncond) if c is not None]
    masks = [c.get("text_mask") for c in branches]
    if any(m is None for m in masks) or len({m.shape[1] for m in masks}) != 1 or not all(bool(m.all()) for m in masks):
        return cond, uncond
    strip = lambda c: None if c is None else {k: v for k, v in c.items() if k != "text_mask"}  # noqa: E731
    return strip(cond), strip(uncond)


#: The two files an inference export folder holds (vfm_models.export.save_export).
_EXPORT_FILES = ("model.safetensors", "config.json")
_EXPECTED = "an inference export is a folder with model.safetensors and config.json"


def _missing_files(folder: Path) -> list[str]:
    return [name for name in _EXPORT_FILES if not (folder / name).is_file()]


def _export_hint(folder: Path) -> str:
    """Where a training run keeps its export, when ``folder`` is the run or one of its checkpoints
    (``vfm train`` writes ``<out_dir>/export`` beside ``<out_dir>/checkpoints/step_*``)."""
    for candidate in (folder / "export", folder.parent.parent / "export", folder.parent / "export"):
        if not _missing_files(candidate):
            return f"; this looks like a training run: its inference export is {candidate}"
    from vfm_parallel.checkpoint_folders import latest

    for root in (folder / "checkpoints", folder):
        try:
            newest = latest(root)
        except OSError:
            continue
        if newest is not None:  # a run stopped before train.steps has checkpoints, no export
            return (f"; this looks like a training run without an export: its newest checkpoint is {newest}, which "
                    "--checkpoint takes (vfm export CHECKPOINT -o DIR writes its export)")
    return ""


def _not_an_export(folder: Path) -> str | None:
    """Why ``folder`` cannot be an export (missing, a file, lacking its two files), with where the
    export is when that can be seen; None when it has both files."""
    if not folder.exists():
        return f"{folder} does not exist ({_EXPECTED}){_export_hint(folder)}"
    if not folder.is_dir():
        if folder.name in _EXPORT_FILES and not _not_an_export(folder.parent):
            return f"{folder} is a file of the export {folder.parent}; give the folder: --checkpoint {folder.parent}"
        return f"{folder} is a file ({_EXPECTED}){_export_hint(folder.parent)}"
    missing = _missing_files(folder)
    if missing:
        return f"{folder} is not an inference export: missing {', '.join(missing)} ({_EXPECTED}){_export_hint(folder)}"
    return None


def _load_failure(folder: Path, exc: Exception) -> str:
    """What went wrong loading an export whose two files are there: which file, and why."""
    import json

    from vfm_models.checkpoint import CheckpointMismatchError

    if isinstance(exc, CheckpointMismatchError):
        return f"checkpoint {folder} does not match its model config: {exc}"
    if isinstance(exc, json.JSONDecodeError):  # vfm_models' InvalidJSONError names the file and the place itself
        said = str(exc) if getattr(exc, "where", None) else f"{folder / 'config.json'} is not valid JSON ({exc})"
        return f"{said}; export the model again or fix the file"
    from safetensors import SafetensorError

    if isinstance(exc, SafetensorError):  # a header or data that does not parse
        return (f"{folder / 'model.safetensors'} cannot be read as safetensors ({exc}): the file is damaged or cut "
                "short (an interrupted copy?); copy or export it again")
    return f"export {folder} cannot be loaded: {exc}"


#: a conditioning kind as a model is described by it
_KINDS = {"text": "text-conditional", "class": "class-conditional", "none": "unconditional"}


class VideoPipeline:
    """Generation from a model and its export metadata on one device.

    ``device``: ``"cpu"`` (the default and the reference), ``"cuda"`` / ``"cuda:N"`` or ``"auto"``.
    ``dtype``: what the transformer runs in, ``"fp32"`` or ``"bf16"`` (default: bf16 on CUDA, fp32 on
    CPU): its weights are cast and it runs under autocast, while the sampler's latents, the
    guidance combination and decoding stay float32. ``compile``: each transformer block compiled
    with ``torch.compile`` (one graph per block; the first video pays for compilation).

    The pipeline takes ``model`` over as it is, without a copy: the module itself is moved to the
    device, cast to ``dtype``, put in eval mode and its parameters stop requiring grad. Pass
    ``copy.deepcopy(model)`` to keep training the original (e.g. a preview during training).

    ``conditioner``: what turns prompts into the model's conditions, instead of the one built from the
    export's text encoder (which is then not loaded), e.g. a
    :meth:`~vfm_infer.conditioning.Conditioner.precomputed` one holding the embeddings of prompts
    generated again and again (``vfm train``'s previews encode theirs once); it is moved to ``device``.
    """

    def __init__(self, model, meta: Mapping[str, Any], *, device: str | torch.device = "cpu",
                 dtype: str | torch.dtype | None = None, parallel: ParallelLayout | None = None,
                 compile: bool = False, allow_torchscript: bool = False,
                 conditioner: Conditioner | None = None) -> None:
        import vfm_models

        from vfm_models.export_generation import lacks, missing_for_generation

        missing = missing_for_generation(meta)
        if missing:
            raise ExportError(f"the export's config.json {lacks(missing)}")
        self.meta = dict(meta)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        _check_not_meta(model)
        self.model = model.to(self.device, self.dtype).eval().requires_grad_(False)
        if compile:  # vfm-parallel's per-block compile, as in training
            from vfm_parallel.strategy import get_strategy

            get_strategy("compile").apply(self.model, None, parallel_plan_of(self.model))
        # vfm_models.build_*: an option the export names that the formulation or tokenizer does not take is named
        # with the accepted ones, not Python's "__init__() got an unexpected keyword argument"
        self.formulation = vfm_models.build_formulation(meta["formulation"], **(meta.get("formulation_options") or {}))
        tokenizer_cls = vfm_models.get_tokenizer(meta["tokenizer"])
        # Only the caller opts in to TorchScript (docs/security.md); export_paths drops an export's own say.
        opt_in = {"allow_torchscript": True} if allow_torchscript and "allow_torchscript" in inspect.signature(tokenizer_cls).parameters else {}
        # seeded as the sharding pipeline builds it: a tokenizer without weights (causal3d at random
        # init) is then the one that encoded the training latents, and the same every run
        self.tokenizer = build_seeded(functools.partial(vfm_models.build_tokenizer, meta["tokenizer"]),
                                      {**(meta.get("tokenizer_options") or {}), **opt_in})
        if isinstance(self.tokenizer, torch.nn.Module):  # decoding runs on the device, in float32
            self.tokenizer = self.tokenizer.to(self.device).eval()
        if conditioner is None:
            self.conditioner = Conditioner(model.config, load_text_encoder(meta, self.device), self.device,
                                           null=meta.get("null_condition"))
        else:
            kind = conditioning_kind(model.config)
            if conditioner.kind != kind:
                raise ValueError(f"the conditioner given makes {conditioner.kind!r} conditions but this model is "
                                 f"{_KINDS[kind]}; accepted: a Conditioner of this model's config")
            self.conditioner = conditioner.to(self.device)
        self.parallel = parallel or ParallelLayout()

    @classmethod
    def from_export(cls, folder: str | Path, *, weights_roots: Sequence[str | Path] = (), **kwargs: Any) -> "VideoPipeline":
        """Load an inference export folder (``model.safetensors`` + ``config.json``). Every path its
        config names must lie inside it or inside one of ``weights_roots``; ``allow_torchscript=True``
        lets a TorchScript tokenizer (cosmos) load (docs/security.md)."""
        folder = Path(folder)
        problem = _not_an_export(folder)
        if problem:
            raise ExportError(problem)
        from vfm_models.export import load_export

        from vfm_models.export import NonFiniteWeightsError, check_finite

        from vfm_models.export_paths import ExportPathError

        try:
            model, meta = load_export(folder, weights_roots=weights_roots)
        except ExportPathError as exc:
            raise ExportError(f"export {folder}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - any loading failure is reported as a bad export
            raise ExportError(_load_failure(folder, exc)) from exc
        try:  # NaN weights sample a NaN latent, which decodes to a black video
            check_finite(model.state_dict(), f"export {folder}")
        except NonFiniteWeightsError as exc:
            raise ExportError(str(exc)) from None
        return cls(model, meta, **kwargs)

    @classmethod
    def from_unsaved_export(cls, model, meta: Mapping[str, Any], *, folder: str | Path,
                            weights_roots: Sequence[str | Path] = (), **kwargs: Any) -> "VideoPipeline":
        """A pipeline of an export that exists only in memory (a training checkpoint's model and its
        recorded ``config.json``): the paths ``meta`` names are checked, and relative ones resolved, as
        an export written to ``folder`` would have them (:meth:`from_export`'s rule), so the pipeline is
        the one that export gives, with no copy of the weights written anywhere."""
        from vfm_models.export_paths import ExportPathError, check_export_paths

        try:
            meta = check_export_paths(folder, meta, weights_roots)
        except ExportPathError as exc:
            raise ExportError(f"export settings of {folder}: {exc}") from exc
        return cls(model, meta, **kwargs)

    # --- checks ----------------------------------------------------------------------------------

    def make_sampler(self, name: str | None, steps: int, options: Mapping[str, Any]) -> Sampler:
        """The named sampler for this export's formulation, with the formulation's schedule options."""
        from vfm_infer.plugins import host

        registered = self.meta["formulation"]
        # A sampler's `formulation` names what the denoiser returns, which is the formulation's own
        # `name` (edm, rectified-flow, ddpm; a plugin's subclass inherits it), not the name it is
        # registered under (a plugin's "my-flow")
        formulation = getattr(self.formulation, "name", "") or registered
        trained = repr(registered) if formulation == registered else f"{registered!r} (name = {formulation!r})"
        name = name or DEFAULT_SAMPLERS.get(formulation)
        if name is None:
            raise ValueError(f"no default sampler for formulation {trained}; name one with --sampler (a formulation's "
                             f"name says what its denoiser returns, which samplers match: {', '.join(FORMULATIONS)})")
        cls = host.get("samplers", name)
        if cls.formulation != formulation:
            fitting = sorted(n for n in host.names("samplers") if getattr(host.get("samplers", n), "formulation", None) == formulation)
            raise ValueError(f"sampler {name!r} samples {cls.formulation!r} but this model was trained with "
                             f"{trained}; use one of: {', '.join(fitting) or '(none registered)'}")
        return build_sampler(name, cls, steps, self.formulation.options(), options)

    def latent_shape(self, frames: int | None, size: tuple[int, int] | None) -> tuple[int, int, int, int]:
        """(C', T', H', W') for a pixel request, checked against the tokenizer and the model's patch."""
        c_lat, t_lat, h_lat, w_lat = (int(v) for v in self.meta["latent_shape"])
        tok, cfg = self.tokenizer, self.model.config
        channels = getattr(tok, "channels", 3)
        if frames is not None or size is not None:
            f = frames if frames is not None else self._default_frames(t_lat, channels)
            h, w = size if size is not None else (h_lat * tok.spatial_compression, w_lat * tok.spatial_compression)
            if min(f, h, w) < 1:
                raise ValueError(f"frames and size must be positive; got {counted(f, 'frame')} at {h}x{w}")
            if size is not None:
                self._check_size(h, w)
            try:
                c_lat, t_lat, h_lat, w_lat = tok.latent_shape((channels, f, h, w))
            except ValueError as exc:
                raise ValueError(f"the {self.meta['tokenizer']!r} tokenizer cannot take {counted(f, 'frame')} at {h}x{w}: {exc}") from None
        if c_lat != cfg.in_channels:
            raise ValueError(f"the tokenizer gives {c_lat} latent channels but the model takes {cfg.in_channels}")
        made = getattr(tok, "latent_channels", None)  # the recorded latent_shape alone would pass, and decode fail
        if made is not None and made != cfg.in_channels:
            from vfm_models.export_generation import tokenizer_channels_problem

            raise ValueError(tokenizer_channels_problem(self.meta, made, cfg.in_channels))
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

    def _check_size(self, h: int, w: int) -> None:
        """One error that states the whole rule for a pixel size: the tokenizer takes multiples of its
        spatial compression, the model multiples of its patch in latents, and H264 even sizes; told one
        at a time, 33x32 was "divisible by 2", then 34x32 "multiples of 4". Names the nearest sizes."""
        sc, (_, ph, pw) = self.tokenizer.spatial_compression, self.model.config.patch
        step_h, step_w = math.lcm(sc * ph, 2), math.lcm(sc * pw, 2)
        if h % step_h == 0 and w % step_w == 0:
            return

        def near(v: int, step: int) -> tuple[int, int]:
            below = max(step, v // step * step)
            return below, below if v % step == 0 or v < step else below + step

        (h_lo, h_hi), (w_lo, w_hi) = near(h, step_h), near(w, step_w)
        nearest = (f"sizes are {h_lo}x{w_lo} or {h_hi}x{w_hi}" if (h_hi, w_hi) != (h_lo, w_lo) else
                   f"size is {h_lo}x{w_lo}")
        rule = (f"height and width multiples of {step_h}" if step_h == step_w else
                f"heights that are multiples of {step_h} and widths that are multiples of {step_w}")
        h264 = ", and even for H264" if (step_h, step_w) != (sc * ph, sc * pw) else ""
        raise ValueError(f"size {h}x{w} is not accepted: this model takes {rule} (its tokenizer's spatial compression "
                         f"{sc} x its patch {ph}x{pw}{h264}); the nearest accepted {nearest}")

    def untrained_shape(self, shape: tuple[int, int, int, int]) -> str | None:
        """A warning when ``shape`` (C', T', H', W') is none of the latent shapes the export records for
        its training data (``latent_shapes``, one per bucket; older exports: ``latent_shape``), naming
        the default one and the request in frames and pixels; None when it is one of them."""
        trained = tuple(int(v) for v in self.meta["latent_shape"])
        known = {tuple(int(v) for v in s) for s in self.meta.get("latent_shapes") or [trained]}
        if tuple(shape) in known | {trained}:
            return None
        tok, channels = self.tokenizer, getattr(self.tokenizer, "channels", 3)
        sc = tok.spatial_compression

        def pixels(s: tuple[int, ...]) -> str:
            return f"{counted(self._default_frames(s[1], channels), 'frame')} at {s[2] * sc}x{s[3] * sc}"

        shapes = [trained, *sorted(known - {trained})]
        beyond = [name for name, i in (("frames", 1), ("height", 2), ("width", 3)) if shape[i] > max(s[i] for s in shapes)]
        kind = getattr(self.model.config, "pos_embed", None)
        reach = (f" (its {kind + ' ' if kind else ''}positions along the larger {', '.join(beyond)} go beyond any it "
                 "trained on)" if beyond else "")
        seen = " and ".join(f"{pixels(s)} (latent {'x'.join(map(str, s))})" for s in shapes)
        return (f"this model was trained on {seen}; "
                f"{pixels(shape)} is a shape it never saw{reach}, so expect a worse video than at the trained "
                f"shape (leave out GenerationSpec's frames and size (--frames and --size) for it)")

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

    def prepare(self, spec: GenerationSpec, prompts: Sequence[str], *, token_shards: int = 1,
                cfg_parallel: bool = False) -> Prepared:
        """Check the whole request before any work; raises ValueError naming what is wrong.

        ``token_shards``: context-parallel ranks that will share the tokens, ``cfg_parallel``: each
        rank will run one guidance branch (both for the memory estimate)."""
        _check_prompts(prompts)
        check_spec(spec, len(prompts))
        sampler = self.make_sampler(spec.sampler, spec.steps, spec.sampler_options)
        shape = self.latent_shape(spec.frames, spec.size)
        for p in prompts:
            self.conditioner.check(p, spec.negative_prompt)
        asked_guidance = spec.guidance
        if spec.guidance is None:
            spec = dataclasses.replace(spec, guidance=default_scale(self.meta))
            if not math.isfinite(spec.guidance):
                raise ExportError(f"the export's default guidance is {spec.guidance}; pass a finite --guidance")
        if self.parallel.cfg_group is not None and self.conditioner.kind == "none":
            raise ValueError("CFG-parallel needs a conditional model; this one is unconditional")
        self.check_memory(shape, spec, token_shards, cfg_parallel)
        notes = [(UntrainedShapeWarning, n) for n in (self.untrained_shape(shape),) if n]
        notes += [(UnusedInputWarning, n) for n in unused_inputs(self.conditioner.kind, prompts, spec.negative_prompt,
                                                                  asked_guidance, spec.guidance)]
        notes += [(NegativeGuidanceWarning, n) for n in negative_guidance(self.conditioner.kind, asked_guidance,
                                                                                      spec.guidance)]
        notes += [(UnusedInputWarning, n) for n in guidance_without_contrast(self.conditioner, prompts, spec.negative_prompt,
                                                                              asked_guidance, spec.guidance)]
        notes += [(PromptTruncatedWarning, n) for n in truncated_prompts(self.conditioner.text_encoder, prompts,
                                                                          spec.negative_prompt)]
        notes += [(UntrainedNullWarning, n) for n in untrained_null(self.conditioner.kind, self.meta.get("cond_dropout"),
                                                                     spec.negative_prompt, asked_guidance)]
        for category, note in notes:
            warnings.warn(note, category, stacklevel=2)
        return Prepared(sampler, shape, spec, tuple(n for _, n in notes))

    def forward_batch(self, spec: GenerationSpec, cfg_parallel: bool = False) -> int:
        """Samples in one denoiser forward of ``spec`` (its guidance resolved): 2 where both guidance
        branches run on this rank as one batch (:func:`vfm_infer.guidance.classifier_free`), else 1 (at
        guidance 0 or 1 one branch runs; under CFG-parallel, ``cfg_parallel`` or set up, each rank runs one)."""
        one_rank = cfg_parallel or self.parallel.cfg_group is not None
        both = self.conditioner.kind != "none" and spec.guidance not in (0.0, 1.0)
        return 2 if both and not one_rank else 1

    def check_memory(self, shape: tuple[int, int, int, int], spec: GenerationSpec, token_shards: int = 1,
                     cfg_parallel: bool = False) -> None:
        """Refuse a request whose estimated peak (:mod:`vfm_infer.memory`) exceeds the device's free memory.
        A forward is a batch of 2 only where both guidance branches run on this rank (not at guidance 0
        or 1, where one branch runs, nor under CFG-parallel, where each rank runs one)."""
        tok = self.tokenizer
        _, t, h, w = shape
        pixels = (getattr(tok, "channels", 3), t * tok.temporal_compression,
                  h * tok.spatial_compression, w * tok.spatial_compression)
        need = memory.estimate(self.model.config, shape, pixels, batch=self.forward_batch(spec, cfg_parallel),
                               dtype=self.dtype, token_shards=token_shards)
        free, where = memory.available(self.device)
        if need.total > free:
            c, t_px, h_px, w_px = pixels
            raise ValueError(f"{counted(t_px, 'frame')} at {h_px}x{w_px} (latent {'x'.join(map(str, shape))}) need {need.describe()} "
                             f"but {where}; ask for fewer frames or a smaller size")

    # --- generation ------------------------------------------------------------------------------

    def _net(self):
        model = self.parallel.model or self.model
        return lambda x, level, cond: self.formulation.denoise(model, x, level, cond)

    def _masks_text_padding(self) -> bool:
        """Whether the model's text attention ignores padding (its plan says so), so CFG may batch a
        prompt with a negative prompt of another length; a model without a plan is not assumed to."""
        from vfm_models.families.plan import ParallelPlanMissingError

        try:
            return bool(parallel_plan_of(self.model).masks_text_padding)
        except ParallelPlanMissingError:
            return False

    def synchronize(self) -> None:
        """Wait for the device's queued work (for timing: CUDA runs asynchronously)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _autocast(self):
        """Lower-precision runs under autocast, so float32 inputs meet bf16 weights where they should."""
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def sample_latent(self, prepared: Prepared, prompt: str, *, index: int = 0,
                      callback: StepCallback | None = None) -> torch.Tensor:
        """Latent (1, C', T', H', W') for ``prompt``; noise is seeded by ``seed + index`` (the same on
        every rank, so parallel ranks step the same latents)."""
        spec = prepared.spec
        cond, uncond = without_full_masks(*self.conditioner(prompt, spec.negative_prompt))
        if self.parallel.cfg_group is not None:
            denoiser = cfg_parallel(self._net(), cond, uncond, spec.guidance, self.parallel.cfg_group)
        else:
            denoiser = classifier_free(self._net(), cond, uncond, spec.guidance,
                                       masks_text_padding=self._masks_text_padding())
        # Drawn on the host, then moved: the same seed gives the same starting noise on every device.
        generator = torch.Generator().manual_seed(spec.seed + index)
        noise = torch.randn((1, *prepared.latent_shape), generator=generator).to(self.device)
        with torch.inference_mode(), self._autocast():
            latent = prepared.sampler.sample(denoiser, noise, generator=generator, callback=callback)
        _check_finite(latent, f"the sampler's latent for prompt {index} ({prompt!r})")
        return latent

    def decode(self, latent: torch.Tensor, spec: GenerationSpec) -> torch.Tensor:
        """Pixels (C, T, H, W) in [-1, 1] from a latent (1, C', T', H', W')."""
        with torch.inference_mode():
            video = decode(self.tokenizer, latent, chunk_frames=spec.decode_chunk_frames, tile=spec.decode_tile)
        _check_finite(video, "the decoded video")
        return video[0].clamp(-1, 1)

    def generate(self, prompt: str, spec: GenerationSpec | None = None, *, index: int = 0,
                 callback: StepCallback | None = None) -> torch.Tensor:
        """One video (C, T, H, W) in [-1, 1]."""
        if not isinstance(prompt, str):  # a list was "unhashable type: 'list'" from deep inside
            raise ValueError(f"generate takes one prompt (a str) and makes one video; got a {type(prompt).__name__}: "
                             "call it once per prompt, with index=i for prompt i's seed (spec.seed + i)")
        spec = spec or GenerationSpec()
        prepared = self.prepare(spec, [prompt])
        return self.decode(self.sample_latent(prepared, prompt, index=index, callback=callback), spec)


def _check_not_meta(model) -> None:
    """A model built on the meta device has no weights to generate with; torch's own error when it is
    moved advises ``to_empty()``, which gives uninitialised memory, not weights."""
    on_meta = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if on_meta:
        raise ValueError(f"the model has {len(on_meta)} parameters or buffers on the meta device (no values, e.g. "
                         f"{on_meta[0]}); load its weights first: VideoPipeline.from_export(folder), or "
                         "vfm_models.export.load_export, or build it on the CPU and load_state_dict(..., assign=True)")


def _check_prompts(prompts: Sequence[str]) -> None:
    # a str is a Sequence[str] too: "a cat" would be five one-letter prompts
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        raise ValueError(f"prompts must be a list of strings; got a {type(prompts).__name__} (one prompt: [prompt])")
    if not prompts:
        raise ValueError("no prompts given")
    wrong = [(i, type(p).__name__) for i, p in enumerate(prompts) if not isinstance(p, str)]
    if wrong:
        raise ValueError(f"prompts must be strings; prompt {wrong[0][0]} is a {wrong[0][1]}")


def _check_finite(x: torch.Tensor, what: str) -> None:
    """One host sync per video: inf or nan here would be written as a black (or garbage) video."""
    bad = (~torch.isfinite(x)).sum().item()
    if bad:
        raise NonFiniteOutputError(f"{what} has {bad} of {x.numel()} values inf or nan; no video written "
                                   "(check the export's weights, the guidance scale and the sampler settings)")
