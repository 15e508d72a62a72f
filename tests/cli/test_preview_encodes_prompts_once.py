"""``vfm train``'s previews encode their prompts once: the first preview that writes its videos keeps the
prompts' conditions on the CPU and lets its text encoder go; the later ones build no text encoder, give the
same videos bit for bit, and a preview the pipeline refuses is refused the same way every time. A prompt past
the text encoder's max_length is noted once per run, at the first preview, as true of every preview."""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import tomllib
import warnings
import weakref
from pathlib import Path

import pytest
import torch
import vfm_models
from vfm_models.plugins import hookimpl, host
from vfm_models.text_encoders.hashing import HashTextEncoder

from tests.cli.one_thread import one_thread_quiet_loader  # noqa: F401 (autouse)
from tests.cli.test_train_validation_previews import SMALL, TINY, WATCHED, _text_config, _text_shards

#: a weak reference to every CountedHash built
BUILT: list[weakref.ref] = []
#: every text a CountedHash encoded, in order
ENCODED: list[str] = []


class CountedHash(HashTextEncoder):
    """The hash encoder, each build counted (and watched: a weak reference says whether it is still alive)."""

    def __init__(self, dim: int = 64, max_length: int = 32, pad_to_max_length: bool = False) -> None:
        super().__init__(dim, max_length, pad_to_max_length)
        BUILT.append(weakref.ref(self))

    def encode(self, texts: list[str]):
        ENCODED.extend(texts)
        return super().encode(texts)

    __call__ = encode


@hookimpl
def vfm_models_register_text_encoders(register):
    register("counted-hash", CountedHash, description="the hash encoder, its builds counted")


@pytest.fixture
def counted_hash(monkeypatch):
    """Registers this module as one more plugin of the vfm_models host, for this test only."""
    monkeypatch.setattr(host, "builtins", (*host.builtins, __name__))
    assert sys.modules[__name__]
    host.reload()
    BUILT.clear()
    ENCODED.clear()
    yield BUILT
    monkeypatch.undo()
    host.reload()


def _previewer(cfg, resolved):
    from vfm_cli.recipe.watching import previewer

    formulation = vfm_models.build_formulation(cfg.model.formulation, **cfg.model.formulation_options)
    return previewer(cfg, resolved, formulation, torch.device("cpu"))


def _text_run(tmp_path: Path, *sets: str):
    """A text model's config and its resolution, its text encoder the counted one (the shards' hash encoder
    with the same options: the same embeddings)."""
    from vfm_cli.recipe import validate
    from vfm_parallel.trainer import apply_overrides, from_dict

    shards = _text_shards(tmp_path / "shards", val=True)
    data = tomllib.loads(_text_config(tmp_path, shards).read_text())
    cfg = from_dict(apply_overrides(data, [*SMALL, *WATCHED, "data.num_samples=1", f"train.out_dir={tmp_path / 'run'}",
                                           *sets]))
    resolved = validate(cfg)
    return cfg, dataclasses.replace(resolved, text_encoder="counted-hash")


def test_three_previews_build_the_text_encoder_once_and_keep_nothing_of_it_alive(tmp_path, counted_hash):
    cfg, resolved = _text_run(tmp_path)
    preview = _previewer(cfg, resolved)
    weights = vfm_models.get_family(cfg.model.family).build(resolved.mcfg).state_dict()
    for step in (2, 4, 6):
        folder = tmp_path / f"step_{step}"
        folder.mkdir()
        assert (folder / "0001.mp4") in preview(folder, weights, step)
    assert len(counted_hash) == 1  # the first preview's, not one per preview
    gc.collect()
    assert counted_hash[0]() is None  # the encoder is gone: the kept conditions hold no reference to it


def test_previews_from_the_kept_conditions_are_bit_identical_to_the_one_that_encoded_its_prompts(tmp_path, counted_hash):
    from vfm_infer.video.mp4 import read_mp4

    # guidance against the null condition (the empty caption's embedding), which is kept too
    cfg, resolved = _text_run(tmp_path, "train.cond_dropout=0.1", "preview.guidance=4.0")
    preview = _previewer(cfg, resolved)
    weights = {k: v.normal_(0, 0.05) for k, v in vfm_models.get_family(cfg.model.family).build(resolved.mcfg).state_dict().items()}
    videos = []
    for step in (2, 4, 6):  # the same weights: the same videos
        folder = tmp_path / f"step_{step}"
        folder.mkdir()
        preview(folder, weights, step)
        videos.append([read_mp4(folder / f"{i:04d}.mp4") for i in range(2)])
    assert len(counted_hash) == 1
    first = videos[0]
    assert first[0].std() > 1  # not a flat video, which any conditions would give
    for later in videos[1:]:
        assert all((a == b).all() for a, b in zip(first, later))


def test_a_preview_the_pipeline_refuses_is_refused_with_the_same_error_every_time(tmp_path):
    from vfm_cli.recipe import validate
    from vfm_parallel.trainer import apply_overrides, from_dict

    data = tomllib.loads(TINY.read_text())
    cfg = from_dict(apply_overrides(data, [*SMALL, *WATCHED, f"train.out_dir={tmp_path / 'run'}",
                                           'preview.prompts=["1", "12"]']))
    preview = _previewer(cfg, validate(cfg))
    weights = vfm_models.get_family("dit").build(validate(cfg).mcfg).state_dict()
    for step in (2, 4):
        folder = tmp_path / f"step_{step}"
        folder.mkdir()
        with pytest.raises(ValueError, match=r"^class index 12 is out of range; this model has classes 0..9$"):
            preview(folder, weights, step)


def _previews(tmp_path: Path, preview, weights, steps) -> list[Path]:
    folders = []
    for step in steps:
        folder = tmp_path / f"step_{step}"
        folder.mkdir()
        preview(folder, weights, step)
        folders.append(folder)
    return folders


def test_two_previews_encode_each_prompt_once_in_all(tmp_path, counted_hash):
    cfg, resolved = _text_run(tmp_path, 'preview.prompts=["a red blob", "a blue blob"]')
    preview = _previewer(cfg, resolved)
    weights = vfm_models.get_family(cfg.model.family).build(resolved.mcfg).state_dict()
    _previews(tmp_path, preview, weights, (2, 4))
    # the empty caption (the null condition, when the first preview's conditioner is built) and each prompt once:
    # not once to generate the first preview's videos and again to keep their conditions
    assert sorted(ENCODED) == ["", "a blue blob", "a red blob"]


LONG = " ".join(f"word{i}" for i in range(40))  # 41 tokens with the end token; the encoder reads 32


def test_a_prompt_past_max_length_is_noted_once_per_run_naming_its_video_as_true_of_every_preview(tmp_path, counted_hash):
    from vfm_infer.checks import PromptTruncatedWarning

    cfg, resolved = _text_run(tmp_path, f'preview.prompts=["a red blob", "{LONG}"]')
    preview = _previewer(cfg, resolved)
    weights = vfm_models.get_family(cfg.model.family).build(resolved.mcfg).state_dict()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # each warning as issued: Python's registry would hide a repeated one
        folders = _previews(tmp_path, preview, weights, (2, 4, 6))
    notes = [str(w.message) for w in caught if issubclass(w.category, PromptTruncatedWarning)]
    assert len(notes) == 1, notes  # at the first preview; the later ones cut the prompt the same way, unsaid
    assert "prompt 1 (video 0001)" in notes[0] and "keeps 32 and drops 9" in notes[0]
    assert "every preview of this run" in notes[0]
    for folder in folders:  # a later preview's folder says it too, for whoever looks at that one alone
        assert json.loads((folder / "prompts.json").read_text())["notes"] == notes
