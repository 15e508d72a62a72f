"""An export whose metadata cannot generate (a key generation needs missing, a name no registry holds, a
tokenizer or text encoder of other widths than the model's) is refused by ``save_export`` before any file
is written, with one error naming each problem; it was written and failed days later at ``vfm generate``.
A weights-only export says so (``for_generation=False``), and a good export still loads and generates."""

from __future__ import annotations

import pytest

import vfm_models
from tests.infer.tiny import LATENT_SHAPE, tiny_dit, tiny_meta
from vfm_models.export import save_export
from vfm_models.export_generation import ExportGenerationError

TEXT_DIM = 16


def _text_model():
    model = vfm_models.get_family("dit-cross").create("tiny", in_channels=LATENT_SHAPE[0], text_dim=TEXT_DIM)
    return model.eval()


def _text_meta(**extra):
    return tiny_meta(**{"text_encoder": "hash", "text_encoder_options": {"dim": TEXT_DIM}, **extra})


BAD = {
    "no formulation, tokenizer, latent_shape": ({"formulation": None, "tokenizer": None, "latent_shape": None},
                                                 r"lacks formulation, tokenizer, latent_shape; generation needs .*"
                                                 r"for_generation=False"),
    "unknown formulation": ({"formulation": "edmm"}, r"formulation 'edmm' is not registered; accepted: .*edm"),
    "unknown tokenizer": ({"tokenizer": "pixle"}, r"tokenizer 'pixle' is not registered; accepted: .*pixel"),
    "tokenizer option it does not take": ({"tokenizer_options": {"pach": 2}},
                                          r"tokenizer 'pixel' has no option pach; accepted: patch, channels"),
    "tokenizer channels": ({"tokenizer_options": {"patch": 1}},
                           r"the export's tokenizer 'pixel' \{'patch': 1\} gives 3 latent channels but the model takes 12"),
    "tokenizer option value it cannot take": ({"tokenizer_options": {"patch": "abc"}},
                                              r"tokenizer 'pixel' cannot take its tokenizer_options \{'patch': 'abc'\}: "
                                              r"invalid literal for int\(\)"),
    "latent_shape channels": ({"latent_shape": [3, 4, 8, 8]}, r"latent_shape \[3, 4, 8, 8\] has 3 channels but the model takes 12"),
    "latent_shape off the patch": ({"latent_shape": [12, 4, 8, 7]}, r"not divisible by the model's patch 1x2x2"),
    "unknown family": ({"family": "ditt"}, r"family 'ditt' is not registered; accepted: .*dit-cross"),
    "null condition of another model": ({"null_condition": {"kind": "none"}},
                                        r"null_condition \{'kind': 'none'\} does not match its model config"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_save_export_refuses_meta_that_cannot_generate_and_writes_nothing(tmp_path, case):
    bad, message = BAD[case]
    model = tiny_dit()
    with pytest.raises(ExportGenerationError, match=message):
        save_export(tmp_path / "export", model, {**tiny_meta(), "config": model.config, **bad})
    assert not (tmp_path / "export").exists()


def test_a_text_encoder_of_another_width_or_none_for_a_text_model_is_refused_when_written(tmp_path):
    model = _text_model()
    with pytest.raises(ExportGenerationError, match=r"the text encoder 'hash' gives 8-wide embeddings but the model's "
                                                    r"text_dim is 16"):
        save_export(tmp_path / "export", model, _text_meta(config=model.config, text_encoder_options={"dim": 8}))
    with pytest.raises(ExportGenerationError, match=r"text-conditional but its export names no text_encoder; accepted: .*hash"):
        save_export(tmp_path / "export", model, _text_meta(config=model.config, text_encoder=None))
    with pytest.raises(ExportGenerationError, match=r"text_encoder 'hsah' is not registered; accepted: .*hash"):
        save_export(tmp_path / "export", model, _text_meta(config=model.config, text_encoder="hsah"))
    assert not (tmp_path / "export").exists()
    save_export(tmp_path / "export", model, _text_meta(config=model.config))


def test_every_problem_is_named_in_one_error(tmp_path):
    model = tiny_dit()
    with pytest.raises(ExportGenerationError, match=r"3 problems") as err:
        save_export(tmp_path / "export", model, {**tiny_meta(config=model.config), "formulation": "edmm",
                                                 "tokenizer": "pixle", "latent_shape": [3, 4, 8, 8]})
    assert all(part in str(err.value) for part in ("'edmm'", "'pixle'", "[3, 4, 8, 8]"))


def test_a_weights_only_export_opts_out_of_what_generation_needs_but_what_it_names_is_checked(tmp_path):
    model = tiny_dit()
    weights_only = {"family": "dit", "config": model.config, "formulation": "edm"}
    save_export(tmp_path / "export", model, weights_only, for_generation=False)
    assert (tmp_path / "export" / "config.json").is_file()
    with pytest.raises(ExportGenerationError, match="formulation 'edmm' is not registered"):
        save_export(tmp_path / "other", model, {**weights_only, "formulation": "edmm"}, for_generation=False)
    with pytest.raises(ExportGenerationError, match="family 'ditt' is not registered"):
        save_export(tmp_path / "other", model, {**weights_only, "family": "ditt"}, for_generation=False)
    assert not (tmp_path / "other").exists()


def test_a_good_export_is_written_loads_and_generates(tmp_path):
    from vfm_infer.pipeline import GenerationSpec, VideoPipeline

    model = tiny_dit()
    folder = save_export(tmp_path / "export", model, tiny_meta(config=model.config))
    video = VideoPipeline.from_export(folder).generate("1", GenerationSpec(steps=2))
    assert video.shape == (3, LATENT_SHAPE[1], 16, 16)
