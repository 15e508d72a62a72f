"""The CLIP embedder and the VLM captioner load tiny random checkpoints the test saves locally."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from vfm_curator.stages.caption import CaptionStage
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.embed import EmbedStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.stages.transcode import TranscodeStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(0)
    tiny = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    cfg = CLIPConfig(
        text_config=dict(tiny, vocab_size=100, max_position_embeddings=16, bos_token_id=0, eos_token_id=1, pad_token_id=1),
        vision_config=dict(tiny, image_size=32, patch_size=8), projection_dim=8,
    )
    path = tmp_path_factory.mktemp("tinyclip")
    CLIPModel(cfg).save_pretrained(path)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def tiny_blip(tmp_path_factory):
    import torch
    from transformers import BertTokenizer, BlipConfig, BlipForConditionalGeneration, BlipImageProcessor, BlipProcessor

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tinyblip")
    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]))
    tiny = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    cfg = BlipConfig(
        text_config=dict(tiny, vocab_size=100, max_position_embeddings=32, bos_token_id=2, sep_token_id=3, pad_token_id=0),
        vision_config=dict(tiny, image_size=32, patch_size=8), projection_dim=8,
    )
    BlipForConditionalGeneration(cfg).save_pretrained(path)
    BlipProcessor(BlipImageProcessor(size={"height": 32, "width": 32}), BertTokenizer(str(vocab))).save_pretrained(path)
    vocab.unlink()  # the processor saved its own copy; loading must not need ours
    return str(path)


@pytest.fixture(scope="module")
def transcoded(tmp_path_factory):
    path = tmp_path_factory.mktemp("v") / "v.mp4"
    make_video(path, [24, 24], seed=1)
    task = VideoTask(str(path))
    for stage in (DecodeStage(), SplitStage(min_clip_s=0.5), TranscodeStage(preset="ultrafast")):
        stage.process([task])
    assert task.failure is None and len(task.clips) == 2
    return task


def test_clip_embedder_gives_unit_embeddings_of_the_projection_size(tiny_clip, transcoded):
    from vfm_curator.embedders import get_embedder

    EmbedStage(embedder="clip", embedder_options={"model_path": tiny_clip}).process([transcoded])
    assert transcoded.failure is None
    for clip in transcoded.clips:
        assert clip.embedding.shape == (8,)
        assert np.linalg.norm(clip.embedding) == pytest.approx(1.0, abs=1e-5)
    embedder = get_embedder("clip", model_path=tiny_clip)
    frames = np.stack(transcoded.clips[0].samples)
    np.testing.assert_allclose(embedder.embed(frames), embedder.embed(frames[::-1])[::-1], atol=1e-6)
    assert not np.allclose(transcoded.clips[0].embedding, transcoded.clips[1].embedding)


def test_clip_embedder_refuses_a_missing_folder(tmp_path):
    from vfm_curator.embedders.clip import ClipEmbedder

    with pytest.raises(ValueError, match="local folder"):
        ClipEmbedder(str(tmp_path / "nope"))


def test_vlm_captioner_captions_clips_without_an_existing_caption(tiny_blip, transcoded):
    from vfm_curator.captioners.vlm import VLMCaptioner

    transcoded.caption = None
    CaptionStage(captioner="vlm", captioner_options={"model_path": tiny_blip, "max_new_tokens": 4}).process([transcoded])
    assert transcoded.failure is None
    direct = VLMCaptioner(tiny_blip, max_new_tokens=4)
    for clip in transcoded.clips:
        assert isinstance(clip.caption, str) and clip.caption
        assert clip.caption == direct.caption(clip.samples)  # greedy decoding is deterministic


def test_existing_captions_win_and_none_is_invented(tiny_blip, transcoded):
    transcoded.caption = "a given caption"
    CaptionStage(captioner="vlm", captioner_options={"model_path": tiny_blip, "max_new_tokens": 4}).process([transcoded])
    assert {c.caption for c in transcoded.clips} == {"a given caption"}
    transcoded.caption = None
    CaptionStage().process([transcoded])
    assert {c.caption for c in transcoded.clips} == {None}
