"""What the trainer's ``[validation]`` and ``[preview]`` need from the other packages: the held-out clips
(vfm-data's ``held_out_samples``, or held-out synthetic blobs) and the preview writer (vfm-infer's
pipeline of the in-memory export, the one ``vfm generate --checkpoint`` builds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
from vfm_parallel.trainer.config import ConfigError, TrainConfig

from vfm_cli.recipe.resolution import Resolved

#: the seed of the held-out synthetic blobs (the training blobs are make_blobs' default 1234)
HELD_OUT_BLOBS_SEED = 4321


def held_out_clips(cfg: TrainConfig, r: Resolved) -> Callable[[], list[dict[str, Any]]] | None:
    """``TrainParts.held_out``: the ``validation.samples`` clips as ``{"x0": (C, T, H, W), "cond": {...}}``
    (the condition as a training batch of one carries it), or None when validation is off."""
    v = cfg.validation
    if not v.interval:
        return None
    if cfg.data.source == "synthetic" and not v.blend:
        return lambda: _held_out_blobs(cfg, r)
    return lambda: [_clip(sample, r.mcfg) for sample in held_out_samples(cfg, r, v.samples)]


def _held_out_blobs(cfg: TrainConfig, r: Resolved) -> list[dict[str, Any]]:
    """Blobs of the training distribution that training never draws (another seed)."""
    from vfm_parallel.trainer.synthetic import make_blobs

    d = cfg.data
    latents, labels = make_blobs(cfg.validation.samples, tuple(d.latent_shape), d.num_classes, seed=HELD_OUT_BLOBS_SEED)
    labelled = bool(getattr(r.mcfg, "num_classes", 0))
    return [{"x0": latents[i], "cond": {"y": labels[i : i + 1]} if labelled else {}} for i in range(len(latents))]


def held_out_samples(cfg: TrainConfig, r: Resolved, count: int) -> list[Any]:
    """The first ``count`` samples of ``validation.split`` of ``validation.blend``, or of the training
    data (its blend, else its folders in turn) when that is ""."""
    from vfm_data.blend_file import SplitNotFoundError
    from vfm_data.held_out import held_out_samples as read

    v, d = cfg.validation, cfg.data
    key = "validation.blend" if v.blend else "validation.split"
    paths = [v.blend] if v.blend else [d.blend] if d.blend else list(d.shards)
    pt, ph, _ = r.mcfg.patch
    samples: list[Any] = []
    for path in paths:
        try:
            samples += read(path, count - len(samples), split_part=v.split, patch_size=ph, temporal_patch=pt,
                            latent_channels=r.mcfg.in_channels, trust_dataset_code=d.trust_dataset_code)
        except SplitNotFoundError as exc:
            raise ConfigError(key, f"{exc}; accepted: validation.split naming a split the data has, or validation.blend "
                                   "naming held-out shards (validation.split = \"train\" reads a folder of them whole)") from None
        if len(samples) == count:
            break
    return samples


def _clip(sample: Any, mcfg: Any) -> dict[str, Any]:
    """A vfm-data sample as a held-out clip: its latent and, for a text model, its text as a batch of one."""
    cond: dict[str, torch.Tensor] = {}
    if mcfg.text_dim:  # as the training loader passes it (vfm_cli.recipe.loaders.ShardBatches)
        length = sample.text.shape[0]
        cond = {"text": sample.text.float()[None], "text_mask": (torch.arange(length) < sample.text_length)[None]}
    return {"x0": sample.latent.float(), "cond": cond}


def preview_prompts(cfg: TrainConfig, r: Resolved) -> list[str]:
    """``preview.prompts``, else ``preview.count`` of: class indices 0, 1, ... (a class model), the held-out
    clips' captions (a text model with a validation split), or the empty prompt (unconditional)."""
    p = cfg.preview
    if p.prompts:
        return list(p.prompts)
    from vfm_models.conditioning import kind_of

    kind = kind_of(r.mcfg)
    if kind == "class":
        return [str(i) for i in range(min(p.count, r.mcfg.num_classes))]
    if kind == "text" and cfg.data.source == "shards":
        try:
            return [s.meta.get("caption", "") for s in held_out_samples(cfg, r, p.count)]
        except ConfigError:  # no held-out split (held_out_samples says so as one): nothing to take captions from
            pass
    return [""] * p.count


def previewer(cfg: TrainConfig, r: Resolved, formulation: Any, device: torch.device):
    """``TrainParts.preview``: ``preview(folder, weights, step)`` writes ``0000.mp4`` ... (one per prompt),
    ``contact_sheet.png`` and ``prompts.json`` (what each video shows) of the weights into folder; None when
    previews are off. Each call builds the pipeline (the model and its tokenizer) and lets it go when the
    videos are written: rank 0 trains on with the memory it had, not a second model beside the training
    state. The prompts are read once, and encoded once: the first preview whose request the pipeline accepts
    keeps their conditions (embeddings, on the CPU), makes its videos from them and drops its text encoder,
    which no later preview loads
    (a T5-XXL class encoder is ~10 GB read from disk and moved to the device, every preview). The tokenizer
    is built again each time: 0.1-0.3 s from safetensors for causal3d at its defaults (29.5M parameters) and
    an SD-sized sd-vae (83.7M), not worth their 113-319 MB held beside training between previews."""
    if not cfg.preview.interval:
        return None
    import vfm_models

    from vfm_cli.recipe.export import recorded_meta

    family = vfm_models.get_family(cfg.model.family)
    meta = recorded_meta(cfg, r, formulation)
    read: dict[str, list[str]] = {}
    tables: dict[str, torch.Tensor] = {}  # the model's non-persistent buffers, from its one real build
    encoded: dict[str, Any] = {}  # "prompts": the prompts' PrecomputedConditioner, from the first accepted preview
    noted: list[str] = []  # the first preview's truncation note, true of every preview (prompts.json repeats it)

    def preview(folder: Path, weights: dict[str, torch.Tensor], step: int) -> list[Path]:
        from vfm_infer.pipeline import GenerationSpec, VideoPipeline
        from vfm_infer.video.frames import to_uint8_frames
        from vfm_infer.video.mp4 import write_mp4
        from vfm_plugins.files import replace_file

        if "prompts" not in read:
            # the prompts first: a failure reading them is the warning of every preview until it is mended,
            # before a pipeline is built for nothing
            read["prompts"] = preview_prompts(cfg, r)
        prompts, p = read["prompts"], cfg.preview
        model = model_of_weights(family, r.mcfg, weights, tables)
        # paths in the settings resolve as in the run's export (RUN/export), as vfm generate --checkpoint does;
        # the pipeline is this call's local: it goes when the call returns (or raises)
        pipe = VideoPipeline.from_unsaved_export(model, meta, folder=Path(cfg.train.out_dir) / "export", device=device,
                                                 conditioner=encoded.get("prompts"))
        del model  # the pipeline holds it (moved to the device)
        spec = GenerationSpec(sampler=p.sampler or None, steps=p.steps, seed=p.seed,
                              guidance=None if p.guidance == -1.0 else p.guidance,
                              frames=p.frames or None, size=tuple(p.size) if p.size else None)
        # the whole request checked once, as vfm generate does: a prompt or setting the pipeline refuses is refused
        # the same way (the same error, in the same order of checks) at every preview, and a note names prompt i's
        # video i (per prompt, each was "prompt 0")
        prepared = prepare_noting_once(pipe, spec, prompts, first="prompts" not in encoded, noted=noted)
        if "prompts" not in encoded:
            # the one encoding of the prompts: the videos below are made from it, and so are every later preview's
            encoded["prompts"] = pipe.conditioner.precomputed(prompts)
            pipe.conditioner = encoded["prompts"].to(pipe.device)  # and with it the text encoder goes
        videos, files = [], []
        for i, prompt in enumerate(prompts):
            video = pipe.decode(pipe.sample_latent(prepared, prompt, index=i), prepared.spec)
            frames = to_uint8_frames(video)  # (T, H, W, 3)
            files.append(write_mp4(folder / f"{i:04d}.mp4", frames, fps=p.fps))
            videos.append(frames)
        del pipe
        files.append(write_sheet(folder / "contact_sheet.png", videos))
        # what each video shows: video i is prompt i at seed + i
        settings = {"step": step, "prompts": prompts, "seed": p.seed, "steps": p.steps, "guidance": spec.guidance,
                    "sampler": p.sampler or "default", "notes": noted}
        replace_file(folder / "prompts.json", json.dumps(settings, indent=2) + "\n")
        return [*files, folder / "prompts.json"]

    return preview


#: said after the first preview's truncation note: the later previews, made from the embeddings kept then, say nothing
EVERY_PREVIEW = ("; every preview of this run generates these prompts cut the same way (this note is given once, at the "
                 "first preview)")


def prepare_noting_once(pipe: Any, spec: Any, prompts: list[str], *, first: bool, noted: list[str]) -> Any:
    """``pipe.prepare(spec, prompts)``, its notes issued as warnings; the first preview's note of prompts past the
    text encoder's max_length says it holds for every preview, and is kept in ``noted``. (A later preview's
    pipeline holds the kept embeddings, no text encoder to count tokens with: it notes no truncation.)"""
    import warnings

    from vfm_infer.checks import PromptTruncatedWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # each note as issued, to issue it again below
        prepared = pipe.prepare(spec, prompts)
    cut = []
    for w in caught:
        message = str(w.message)
        if first and issubclass(w.category, PromptTruncatedWarning):
            message += EVERY_PREVIEW
            cut.append(message)
        warnings.warn(message, w.category, stacklevel=3)
    if first:  # again if the first preview failed before it kept the embeddings: that one is the first again
        noted[:] = cut
    return prepared


def model_of_weights(family: Any, config: Any, weights: dict[str, torch.Tensor],
                     tables: dict[str, torch.Tensor]) -> torch.nn.Module:
    """The family's model holding ``weights`` themselves (assigned, not copied), built on the meta device: a
    real build initialises every parameter only for the weights to replace it, each preview (dit, one CPU
    thread: 3.4 s at 457M parameters, 10 s at 1.2B), and holds a second full copy beside ``weights``.
    Non-persistent buffers are in no state dict: their values (tables the build computes from the config)
    are taken from one real build, made at the first call that meets them and kept in ``tables``. A family
    that cannot be built on the meta device is built for real and loaded."""
    try:
        with torch.device("meta"):
            model = family.build(config)
    except Exception:  # noqa: BLE001 - a plugin family whose build needs real tensors
        model = family.build(config)
        model.load_state_dict(weights, strict=True)
        return model
    model.load_state_dict(weights, strict=True, assign=True)
    unset = [name for name, buffer in model.named_buffers() if buffer.is_meta]
    if unset and not tables:
        tables.update((name, buffer) for name, buffer in family.build(config).named_buffers() if name in unset)
    for name in unset:
        owner, _, leaf = name.rpartition(".")
        model.get_submodule(owner).register_buffer(leaf, tables[name].clone(), persistent=False)
    return model


def write_sheet(path: Path, videos: list, *, frames: int = 8, min_height: int = 64, gap: int = 2) -> Path:
    """A PNG with a row per video (in prompt order) of up to ``frames`` evenly spaced frames, enlarged
    (nearest neighbour) to at least ``min_height`` pixels high so that a tiny model's videos can be seen."""
    from vfm_infer.video.contact_sheet import row_per_video, write_png

    return write_png(path, row_per_video(videos, max_frames=frames, min_height=min_height, gap=gap))
