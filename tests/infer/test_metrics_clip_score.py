"""``clip-score`` on tiny random-init CLIP and SigLIP folders: the frames are prepared as the model's own
processor prepares them, and the score equals a direct transformers computation on the same frames."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.infer.metric_models import moving_square, tiny_clip_folder
from vfm_infer.metrics import EvalItem, Metric
from vfm_infer.metrics.base import load_metric
from vfm_infer.metrics.clip_score import CLIPScore, evenly_spaced
from vfm_infer.plugins import host

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=["clip", "siglip"])
def model_folder(request, tmp_path_factory):
    return tiny_clip_folder(tmp_path_factory.mktemp(request.param), request.param)


def _processor(folder):
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()
    try:
        return transformers.AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    finally:
        transformers.utils.logging.set_verbosity(verbosity)


def direct_scores(folder, items, frames=None):
    """Per video: the model's own processor and tokenizer, the model's forward embeddings, cos, clipped, x100, mean."""
    model = transformers.AutoModel.from_pretrained(folder, local_files_only=True).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    processor = _processor(folder)
    siglip = model.config.model_type == "siglip"
    scores = []
    for item in items:
        picked = item.frames[evenly_spaced(len(item.frames), frames)]
        pixels = processor(images=list(picked), return_tensors="pt")["pixel_values"]
        text = tokenizer([item.prompt], padding="max_length" if siglip else "longest",
                         max_length=model.config.text_config.max_position_embeddings, truncation=True, return_tensors="pt")
        inputs = {"input_ids": text["input_ids"]} if siglip else {"input_ids": text["input_ids"], "attention_mask": text["attention_mask"]}
        with torch.no_grad():
            out = model(pixel_values=pixels, **inputs)
        cos = torch.nn.functional.cosine_similarity(out.image_embeds, out.text_embeds)  # (F,) against the one text
        scores.append(float((100 * cos.clamp(min=0)).mean()))
    return scores


def _items():
    return [EvalItem("a red square moving right", moving_square(0, frames=7, size=40)),
            EvalItem("a blue circle moving left", moving_square(1, frames=5, size=40)[:, :, 4:]),  # 40x36: not square
            EvalItem("a fox in the snow", moving_square(2, frames=6, size=24))]  # upscaled to 32


def test_clip_score_and_fvd_are_registered_metrics():
    assert {"clip-score", "fvd"} <= set(host.names("metrics"))
    assert host.get("metrics", "clip-score") is CLIPScore


@pytest.mark.parametrize("shape", [(40, 56), (120, 90), (24, 24), (64, 96)])
def test_frame_preprocessing_matches_the_models_own_processor(model_folder, shape):
    metric = CLIPScore(model=str(model_folder), device="cpu")
    metric.load()
    frames = np.random.default_rng(0).integers(0, 256, size=(3, *shape, 3), dtype=np.uint8)  # noise: the hardest case
    theirs = _processor(model_folder)(images=list(frames), return_tensors="pt")["pixel_values"]
    ours = metric.preprocess(torch.from_numpy(frames))
    assert ours.shape == theirs.shape
    std = torch.tensor(metric.preprocess.std).view(1, 3, 1, 1)
    levels = ((ours - theirs) * std * 255).abs()  # in uint8 levels
    assert float(levels.max()) <= 2.01 and float((levels > 1.01).float().mean()) < 1e-3


@pytest.mark.parametrize("shape", [(40, 56), (120, 90), (24, 24), (64, 96)])
def test_frame_preprocessing_with_nearest_resampling_picks_the_pixels_pil_picks(model_folder, shape):
    from vfm_infer.metrics.clip_score import ImagePreprocess

    processor = _processor(model_folder)
    processor.resample = 0  # PIL.Image.NEAREST: a pixel off is a whole level of noise off, no rounding to hide it
    frames = np.random.default_rng(0).integers(0, 256, size=(3, *shape, 3), dtype=np.uint8)
    theirs = processor(images=list(frames), return_tensors="pt")["pixel_values"]
    ours = ImagePreprocess(processor)(torch.from_numpy(frames))
    assert torch.allclose(ours, theirs, atol=1e-4)


def test_clip_score_equals_a_direct_transformers_computation_on_the_same_frames(model_folder):
    items = _items()
    result = CLIPScore(model=str(model_folder), device="cpu").evaluate(items)
    expected = direct_scores(model_folder, items)
    ours = [row["clip_score"] for row in result.per_video]
    assert ours == pytest.approx(expected, abs=0.05)
    assert [row["frames"] for row in result.per_video] == [7, 5, 6]
    assert result.summary["clip_score"] == pytest.approx(np.mean(ours))
    assert result.summary["videos"] == 3
    json.dumps(result.summary), json.dumps(result.per_video)  # what vfm eval writes


def test_clip_score_of_n_sampled_frames_is_deterministic_and_uses_evenly_spaced_frames(model_folder):
    items = _items()
    metric = CLIPScore(model=str(model_folder), device="cpu", frames=3, batch_size=2)  # batches across frames
    first, again = metric.evaluate(items), CLIPScore(model=str(model_folder), device="cpu", frames=3).evaluate(items)
    assert first.per_video == again.per_video
    assert [row["frames"] for row in first.per_video] == [3, 3, 3]
    assert list(evenly_spaced(7, 3)) == [0, 3, 6] and list(evenly_spaced(2, 3)) == [0, 1]
    assert [row["clip_score"] for row in first.per_video] == pytest.approx(direct_scores(model_folder, items, 3), abs=0.05)


def test_clip_score_scores_bf16_close_to_fp32(model_folder):
    items = _items()[:1]
    fp32 = CLIPScore(model=str(model_folder), device="cpu", dtype="fp32").evaluate(items).per_video[0]["clip_score"]
    bf16 = CLIPScore(model=str(model_folder), device="cpu", dtype="bf16").evaluate(items).per_video[0]["clip_score"]
    assert bf16 == pytest.approx(fp32, abs=2.0)


def test_clip_score_options_are_named_with_what_they_accept(tmp_path, model_folder):
    with pytest.raises(ValueError, match=r"^metric 'clip-score' needs the option model: a local folder of a transformers "
                                         r"CLIP or SigLIP model .*\(--option clip-score.model=PATH\)$"):
        load_metric("clip-score")
    with pytest.raises(ValueError, match="clip-score.model = .* is not a folder; accepted: a local folder"):
        load_metric("clip-score", {"model": str(tmp_path / "nope")})
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    for name in ("config.json", "preprocessor_config.json"):
        (pickled / name).write_bytes((model_folder / name).read_bytes())
    (pickled / "pytorch_model.bin").write_bytes(b"a pickle")
    with pytest.raises(ValueError, match=r"holds no .safetensors weights \(pickled .bin weights are not loaded\)"):
        load_metric("clip-score", {"model": str(pickled)})
    with pytest.raises(ValueError, match=r"clip-score.frames = 0; accepted: an integer >= 1"):
        CLIPScore(model=str(model_folder), frames=0)
    with pytest.raises(ValueError, match="clip-score.dtype = 'half'; accepted: auto, bf16, fp32"):
        CLIPScore(model=str(model_folder), dtype="half")
    assert isinstance(load_metric("clip-score", {"model": str(model_folder)}), Metric)


def test_a_folder_of_another_model_type_or_with_code_of_its_own_is_refused(tmp_path):
    from transformers import BertConfig

    from transformers import BertModel

    BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="holds a 'bert' model; accepted: .*model_type clip or siglip"):
        CLIPScore(model=str(tmp_path / "bert")).load()
    folder = tiny_clip_folder(tmp_path / "custom")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="names Python code of its own"):
        CLIPScore(model=str(folder)).load()
