"""Generation keeps every tensor on the pipeline's device and does not wait for it step by step. The
CPU tests generate on CPU tensors, where a tensor made without ``device=`` or a host sync costs
nothing; on a GPU the first fails and the second stalls every denoising step. Here the pipeline
``vfm generate`` builds (:class:`~vfm_infer.pipeline.VideoPipeline`, its conditioner and tokenizer)
is moved to the ``meta`` device and runs every registered sampler, with and without guidance, for
each model family, then decodes (pixel and causal 3D tokenizers, whole, tiled and chunked): a
CPU-made tensor or a host sync fails it, and the host-to-device copies of a video (its starting
noise, its conditions) must not grow with the number of steps.

The pipeline's two host syncs per video, by design, are replaced here: the finite check of the
latent and of the video (``_check_finite``), and the check whether a text mask masks anything
(``without_full_masks``), which the test decides instead (masks kept with guidance, dropped
without, so both attention paths run)."""

from __future__ import annotations

import pytest

from tests.meta_device import in_subprocess

FAMILIES = ("dit", "dit-cross", "moviegen", "stdit")

#: tiny sizes; in_channels and patch come from the tokenizer
SIZES = {
    "dit": dict(hidden=32, depth=2, num_heads=2, num_classes=4),
    "dit-cross": dict(hidden=32, depth=2, num_heads=2, text_dim=16),
    "moviegen": dict(hidden=32, depth=2, num_heads=4, num_kv_heads=2, text_dim=16),
    "stdit": dict(hidden=32, depth=2, num_heads=2, text_dim=16),
}
#: (name, options, latent (C', T', H', W')) per tokenizer
TOKENIZERS = {
    "pixel": ("pixel", {"patch": 2}, (12, 2, 4, 4)),
    "causal3d": ("causal3d", {"temporal_compression": 2, "spatial_compression": 2, "latent_channels": 4,
                              "base_channels": 4}, (4, 2, 4, 4)),
}
#: what makes a sampler draw fresh noise each step, where it can
STOCHASTIC = {"edm-heun": {"churn": 1.0}, "edm-euler": {"churn": 1.0}, "ddim": {"eta": 1.0}}


def _pipeline_on_meta(family: str, formulation: str, tokenizer: str = "pixel"):
    import torch

    import vfm_models
    from tests.meta_device import META
    from vfm_infer.pipeline import VideoPipeline

    name, options, shape = TOKENIZERS[tokenizer]
    text = "text_dim" in SIZES[family]
    torch.manual_seed(0)
    model = vfm_models.get_family(family).create(**SIZES[family], in_channels=shape[0], patch=(1, 2, 2))
    meta = {"family": family, "formulation": formulation,
            "formulation_options": vfm_models.get_formulation(formulation)().options(),
            "tokenizer": name, "tokenizer_options": options, "latent_shape": list(shape),
            "text_encoder": "hash" if text else None, "text_encoder_options": {"dim": 16} if text else {}}
    pipe = VideoPipeline(model, meta)  # built on the CPU as `vfm generate` builds it, then moved
    pipe.model.to(META)
    if isinstance(pipe.tokenizer, torch.nn.Module):
        pipe.tokenizer.to(META)
    pipe.device = pipe.conditioner.device = META
    if pipe.conditioner.null is not None:
        pipe.conditioner.null = {k: v.to(META) for k, v in pipe.conditioner.null.items()}
    return pipe


def _video_on_meta(pipe, family: str, spec) -> int:
    """Samples and decodes one video on meta; returns its host-to-device copies."""
    import warnings

    from tests.meta_device import HostCopies
    from vfm_infer import pipeline

    prompt = "1" if family == "dit" else "a red cube moving left"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. an untrained null condition: not what this test is about
        prepared = pipe.prepare(spec, [prompt])
    keep_masks = spec.guidance != 1.0
    pipeline.without_full_masks = lambda c, u: (c, u) if keep_masks else tuple(
        None if d is None else {k: v for k, v in d.items() if k != "text_mask"} for d in (c, u))
    with HostCopies() as host:
        video = pipe.decode(pipe.sample_latent(prepared, prompt), spec)
    assert video.device.type == "meta", video.device
    return len(host.copies)


def _every_sampler_on_meta(family: str) -> None:
    from vfm_infer import pipeline
    from vfm_infer.pipeline import GenerationSpec
    from vfm_infer.plugins import host

    pipeline._check_finite = lambda x, what: None  # one sync per video, by design (see the module docstring)
    negative = "" if family == "dit" else "blurry, dark"  # a text of another length than the prompt's
    pipes = {}
    for sampler in host.names("samplers"):
        formulation = host.get("samplers", sampler).formulation
        pipe = pipes.get(formulation) or pipes.setdefault(formulation, _pipeline_on_meta(family, formulation))
        for guidance in (1.0, 3.0):
            spec = GenerationSpec(sampler=sampler, steps=2, guidance=guidance, negative_prompt=negative)
            copies = [_video_on_meta(pipe, family, spec), _video_on_meta(pipe, family, GenerationSpec(
                sampler=sampler, steps=3, guidance=guidance, negative_prompt=negative))]
            assert copies[0] == copies[1], f"{sampler} at guidance {guidance}: host-to-device copies grow with the steps {copies}"
        if sampler in STOCHASTIC:
            _video_on_meta(pipe, family, GenerationSpec(sampler=sampler, steps=2, guidance=3.0,
                                                        sampler_options=STOCHASTIC[sampler]))


def _decoding_on_meta() -> None:
    from vfm_infer import pipeline
    from vfm_infer.pipeline import GenerationSpec

    pipeline._check_finite = lambda x, what: None
    for tokenizer in TOKENIZERS:
        pipe = _pipeline_on_meta("dit", "rectified-flow", tokenizer)
        for tile, chunk in ((None, None), (2, 1)):  # whole; tiled and chunked
            _video_on_meta(pipe, "dit", GenerationSpec(steps=1, guidance=3.0, decode_tile=tile, decode_chunk_frames=chunk))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_sampler_with_and_without_guidance_keeps_every_tensor_on_the_device(family):
    in_subprocess("tests.infer.test_generation_device_placement", f"_every_sampler_on_meta({family!r})")


def test_decoding_whole_tiled_and_chunked_keeps_every_tensor_on_the_device():
    in_subprocess("tests.infer.test_generation_device_placement", "_decoding_on_meta()")
