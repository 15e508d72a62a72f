"""Caption QA: a score per caption of how well it agrees with its clip's frames (tiny random-init
CLIP and SigLIP for the mechanics, a fixed colour embedder for the ranking maths), thresholds that
flag or drop over the whole folder, and the report listing flagged captions with their frames."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("transformers")

import vfm_curator
from vfm_curator.pipelines.review import caption_review, zscores
from vfm_curator.stages.caption_qa import CLIP_SCORE, VLM_SCORE, CaptionQAStage, caption_scores
from vfm_curator.synth import make_video
from vfm_curator.tasks import Clip

from .test_models import tiny_clip, transcoded  # noqa: F401  (fixtures: tiny CLIP checkpoint, a transcoded task)

WORDS = ["a", "red", "green", "blue", "ball", "sky", "sea", "grass", "yes", "no", "question", "does", "the", "caption",
         "describe", "this", "picture", "answer", "or", ":", "?", '"']


def _vocab(path) -> str:
    vocab = path / "vocab.txt"
    # CLIP pools the text at its end token: id 1 ([SEP], the tiny config's eos_token_id)
    vocab.write_text("\n".join(["[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]", *WORDS] + [f"w{i}" for i in range(60)]))
    return str(vocab)


@pytest.fixture(scope="module")
def clip_model(tiny_clip, tmp_path_factory):  # noqa: F811
    """test_models' tiny CLIP with a tokenizer saved beside it (text embeddings need one)."""
    from transformers import BertTokenizer

    path = tmp_path_factory.mktemp("tinyclip_text") / "model"
    shutil.copytree(tiny_clip, path)
    BertTokenizer(_vocab(path.parent), cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]").save_pretrained(path)
    return str(path)


class ColourWords:
    """A fixed text-image embedder for the ranking maths: a frame is its mean RGB, a caption the sum
    of the colour words it holds (red, green, blue), both as unit vectors."""

    dim = 3
    AXES = {"red": 0, "green": 1, "blue": 2}

    def embed(self, frames):
        x = np.asarray(frames, np.float32).mean(axis=(1, 2))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def embed_text(self, texts):
        out = np.full((len(texts), 3), 1e-3, np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                if word in self.AXES:
                    out[i, self.AXES[word]] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def solid(rgb, n=3):
    return [np.full((8, 8, 3), rgb, np.uint8) for _ in range(n)]


def test_a_caption_that_matches_its_frames_outranks_one_that_does_not_and_is_not_flagged():
    red, blue = (230, 20, 20), (20, 30, 220)
    clips = [Clip(0, 10, caption="a red ball", samples=solid(red)), Clip(0, 10, caption="a blue sky", samples=solid(red)),
             Clip(0, 10, caption="a blue sea", samples=solid(blue)), Clip(0, 10, caption="a red sky", samples=solid(blue)),
             Clip(0, 10, caption=None, samples=solid(red)), Clip(0, 10, caption="red", samples=[])]
    scores = caption_scores(ColourWords(), clips)
    assert scores[0] > scores[1] and scores[2] > scores[3]
    assert scores[4] is None and scores[5] is None  # no caption, no frame: not judged
    # the score is the mean over frames: a clip half red, half blue sits between the two
    half = caption_scores(ColourWords(), [Clip(0, 10, caption="a red ball", samples=solid(red, 2) + solid(blue, 2))])[0]
    assert scores[3] < half < scores[0]
    folder = np.array(scores[:4] * 3 + [None], dtype=float)  # 12 captioned clips and one with no caption (NaN)
    ids = [f"c{i:02d}" for i in range(len(folder))]
    qa = {**CaptionQAStage.defaults, "min_score": -0.5}  # z-score within the folder
    flagged = caption_review(ids, folder, np.full(len(folder), np.nan), qa)
    assert {e["id"] for e in flagged} == {ids[i] for i, s in enumerate(folder) if s in (scores[1], scores[3])}
    assert all(e["action"] == "flagged" and e["z"] < -0.5 for e in flagged)
    raw = caption_review(ids, folder, np.full(len(folder), np.nan),
                         {**qa, "calibration": "raw", "min_score": float(min(scores[:4])) + 1e-6, "action": "drop"})
    lowest = {ids[i] for i, s in enumerate(folder) if s == min(scores[:4])}
    assert {e["action"] for e in raw} == {"removed"} and {e["id"] for e in raw} == lowest and len(lowest) == 3


def test_zscores_within_the_run():
    np.testing.assert_allclose(zscores(np.array([1.0, 2.0, 3.0])), [-1.2247449, 0.0, 1.2247449], rtol=1e-6)
    np.testing.assert_array_equal(zscores(np.array([0.3, 0.3])), [0.0, 0.0])  # no spread: nobody is an outlier


def test_clip_scores_are_the_mean_caption_frame_cosine_of_each_clip(clip_model, transcoded):  # noqa: F811
    from vfm_curator.embedders.clip import ClipEmbedder

    captions = ["a red ball", "the blue sea"]
    for clip, caption in zip(transcoded.clips, captions):
        clip.caption, clip.rejected = caption, None
        clip.scores.pop(CLIP_SCORE, None)
    CaptionQAStage(embedder_options={"model_path": clip_model}).process([transcoded])
    assert transcoded.failure is None
    model = ClipEmbedder(clip_model)
    for clip, caption in zip(transcoded.clips, captions):
        frames = model.embed(np.stack(clip.samples))  # (F, 8)
        text = model.embed_text([caption])[0]
        assert len(frames) >= 2 and clip.scores[CLIP_SCORE] == pytest.approx(float(np.mean(frames @ text)), abs=1e-5)
    assert transcoded.clips[0].scores[CLIP_SCORE] != transcoded.clips[1].scores[CLIP_SCORE]
    # a clip the filter dropped, or one with no caption, gets no score
    transcoded.clips[0].rejected, transcoded.clips[1].caption = "motion", None
    for clip in transcoded.clips:
        clip.scores.pop(CLIP_SCORE)
    CaptionQAStage(embedder_options={"model_path": clip_model}).process([transcoded])
    assert [CLIP_SCORE in c.scores for c in transcoded.clips] == [False, False]


def test_a_siglip_checkpoint_scores_too(tmp_path):
    import torch
    from transformers import BertTokenizer, SiglipConfig, SiglipImageProcessor, SiglipModel

    from vfm_curator.embedders.clip import ClipEmbedder

    torch.manual_seed(0)
    tiny = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    SiglipModel(SiglipConfig(text_config=dict(tiny, vocab_size=100, max_position_embeddings=16),
                             vision_config=dict(tiny, image_size=32, patch_size=8))).save_pretrained(tmp_path / "m")
    SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(tmp_path / "m")
    BertTokenizer(_vocab(tmp_path)).save_pretrained(tmp_path / "m")
    model = ClipEmbedder(str(tmp_path / "m"))
    rng = np.random.default_rng(0)
    clips = [Clip(0, 9, caption=c, samples=[rng.integers(0, 255, (40, 48, 3), dtype=np.uint8) for _ in range(3)])
             for c in ("a red ball", "a blue sea")]
    scores = caption_scores(model, clips)
    assert model.kind == "siglip" and model.dim == 16 and all(-1 <= s <= 1 for s in scores) and scores[0] != scores[1]


def test_options_are_checked_with_what_is_accepted(clip_model):
    with pytest.raises(ValueError, match="calibration 'zz'; accepted: z, raw"):
        CaptionQAStage(embedder_options={"model_path": clip_model}, calibration="zz")
    with pytest.raises(ValueError, match="action 'delete'; accepted: flag, drop"):
        CaptionQAStage(embedder_options={"model_path": clip_model}, action="delete")
    with pytest.raises(ValueError, match="model_path is required"):
        CaptionQAStage()
    with pytest.raises(ValueError, match=r"min_vlm = 2 is out of range"):
        CaptionQAStage(embedder_options={"model_path": clip_model}, min_vlm=2)


@pytest.fixture(scope="module")
def curated(clip_model, tmp_path_factory):
    """Three real H264 videos with sidecar captions, curated with the caption_qa stage (tiny CLIP)."""
    root = tmp_path_factory.mktemp("qa")
    for name, seed, caption in (("a", 1, "a red ball"), ("b", 2, "the blue sea"), ("c", 3, "green grass")):
        make_video(root / "in" / f"{name}.mp4", [30, 30], seed=seed)
        (root / "in" / f"{name}.txt").write_text(caption)
    config = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.5}}}
    config["stages"] = ["decode", "split", "stitch", "transcode", "embed", "caption", "filter", "caption_qa", "write"]
    config["options"]["caption_qa"] = {"embedder_options": {"model_path": clip_model}, "min_score": None}
    summary = vfm_curator.curate([str(root / "in")], root / "out", config)
    assert (summary.clips, summary.captions_flagged) == (6, 0)
    return root, config


def _rerun(root, config, **qa):
    """The same folder again: every video is finished, the thresholds are applied to the folder anew."""
    config = json.loads(json.dumps(config))
    config["options"]["caption_qa"].update(qa)
    return vfm_curator.curate([str(root / "in")], root / "out", config)


def test_thresholds_flag_or_drop_over_the_folder_and_the_report_shows_flagged_captions_with_frames(curated):
    root, config = curated
    out = root / "out"
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    scores = {r["id"]: dict(r["scores"])[CLIP_SCORE] for r in rows}
    assert len(scores) == 6 and len(set(scores.values())) == 6
    cut = sorted(scores.values())[2]  # the lowest two fall under it
    low = {cid for cid, s in scores.items() if s < cut}

    summary = _rerun(root, config, min_score=cut, calibration="raw", action="flag")
    assert (summary.processed, summary.clips, summary.captions_flagged, summary.captions_dropped) == (0, 6, 2, 0)
    review = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    assert {e["id"] for e in review} == low and {e["action"] for e in review} == {"flagged"}
    report = (out / "report.html").read_text()
    for cid in low:
        assert f'<tr class="caption-qa" data-id="{cid}" data-action="flagged">' in report
        assert f'<img src="thumbs/{cid}.jpg"' in report and (out / "thumbs" / f"{cid}.jpg").is_file()
    assert "6 captions scored, 2 flagged, 0 dropped" in report and report.count('data-v="kept, caption flagged') == 2

    summary = _rerun(root, config, min_score=cut, calibration="raw", action="drop")
    assert (summary.clips, summary.captions_flagged, summary.captions_dropped) == (4, 0, 2)
    assert {r["id"] for r in pq.read_table(out / "clips.parquet").to_pylist()} == set(scores) - low
    report = (out / "report.html").read_text()
    assert report.count('data-action="removed"') == 2 and report.count('data-status="removed"') == 2

    # z-score within the folder: 0 flags exactly the clips under the folder's mean
    summary = _rerun(root, config, min_score=0.0, calibration="z", action="flag")
    mean = np.mean(list(scores.values()))
    assert summary.captions_flagged == sum(s < mean for s in scores.values()) > 0


def test_vlm_yes_no_pass_scores_captions(transcoded, tmp_path):  # noqa: F811
    import torch
    from transformers import BertTokenizer, BlipConfig, BlipForConditionalGeneration, BlipImageProcessor, BlipProcessor

    from vfm_curator.captioners.judge import VLMJudge

    torch.manual_seed(0)
    tiny = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    cfg = BlipConfig(text_config=dict(tiny, vocab_size=100, max_position_embeddings=48, bos_token_id=0, sep_token_id=1,
                                      pad_token_id=2), vision_config=dict(tiny, image_size=32, patch_size=8), projection_dim=8)
    path = tmp_path / "blip"
    BlipForConditionalGeneration(cfg).save_pretrained(path)
    BlipProcessor(BlipImageProcessor(size={"height": 32, "width": 32}), BertTokenizer(_vocab(tmp_path))).save_pretrained(path)
    judge = VLMJudge(str(path))
    frames = transcoded.clips[0].samples
    p_ball, p_sea = judge.agreement(frames, "a red ball"), judge.agreement(frames, "the blue sea")
    assert 0 < p_ball < 1 and 0 < p_sea < 1 and p_ball != p_sea and judge.agreement(frames, "a red ball") == p_ball
    # a judge in bf16 (what device auto gives on CUDA) feeds its pixels in bf16 too
    assert 0 < VLMJudge(str(path), dtype="bf16").agreement(frames, "a red ball") < 1
    for clip in transcoded.clips:
        clip.caption, clip.rejected = "a red ball", None
    CaptionQAStage(embedder=None, vlm_options={"model_path": str(path)}).process([transcoded])
    assert [c.scores[VLM_SCORE] for c in transcoded.clips] == [judge.agreement(c.samples, "a red ball") for c in transcoded.clips]
    vlm = np.array([c.scores[VLM_SCORE] for c in transcoded.clips])
    flagged = caption_review([c.id for c in transcoded.clips], np.full(len(vlm), np.nan), vlm,
                             {**CaptionQAStage.defaults, "min_vlm": float(vlm.max())})
    assert [e["id"] for e in flagged] == [c.id for c, p in zip(transcoded.clips, vlm) if p < vlm.max()]
    assert all(e["why"].startswith("VLM P(yes)") for e in flagged)
    with pytest.raises(ValueError, match="same token"):
        VLMJudge(str(path), yes="maybe", no="perhaps")  # both unknown: one [UNK] id


def test_command_line_options_add_the_stage_before_write_and_bad_values_are_refused(clip_model, tmp_path):
    from vfm_curator.config import CurateConfig
    from vfm_curator.pipelines.clipping import stage_specs
    from vfm_curator.pipelines.review import apply_options

    cfg = CurateConfig()
    apply_options(cfg, caption_qa_model=clip_model, caption_min_score=0.21, caption_qa="drop", caption_calibration="raw",
                  dedup_threshold=0.9)
    assert cfg.stages[-2:] == ["caption_qa", "write"] and cfg.dedup == {"enabled": True, "threshold": 0.9}
    assert cfg.options["caption_qa"] == {"embedder_options": {"model_path": clip_model}, "min_score": 0.21,
                                         "action": "drop", "calibration": "raw"}
    assert [s.name for s in stage_specs(cfg, tmp_path / "out")][-2:] == ["caption_qa", "write"]
    cfg = CurateConfig()
    apply_options(cfg, caption_qa_model=clip_model, caption_qa="delete")
    with pytest.raises(ValueError, match="action 'delete'; accepted: flag, drop"):
        stage_specs(cfg, tmp_path / "out")
    cfg = CurateConfig()
    apply_options(cfg, caption_min_score=-1.0)  # a threshold with no model: the stage says what it needs
    with pytest.raises(ValueError, match="model_path is required"):
        stage_specs(cfg, tmp_path / "out")
