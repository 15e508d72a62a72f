"""Every caption says where it came from (``clip.caption_by``): the manifest, a sidecar file, or a
captioner with its model and prompt; a clip without a caption records nothing."""

from __future__ import annotations

from vfm_curator.stages.caption import CaptionStage
from vfm_curator.tasks import Clip, VideoTask

from tests.curator.test_models import tiny_blip, transcoded  # noqa: F401 - fixtures


def _task(tmp_path, caption=None, sidecar=None) -> VideoTask:
    source = tmp_path / "v.mp4"
    source.write_bytes(b"")
    if sidecar is not None:
        (tmp_path / "v.txt").write_text(sidecar)
    task = VideoTask(str(source), caption=caption)
    task.clips = [Clip(0, 10, id="c0"), Clip(10, 20, id="c1")]
    return task


def test_manifest_and_sidecar_captions_are_recorded_as_such_and_none_records_nothing(tmp_path):
    task = _task(tmp_path, caption="from the manifest", sidecar="from the sidecar")
    CaptionStage().process([task])
    assert [(c.caption, c.caption_by) for c in task.clips] == [("from the manifest", {"captioner": "manifest"})] * 2
    task = _task(tmp_path, sidecar="from the sidecar")
    CaptionStage().process([task])
    assert [(c.caption, c.caption_by) for c in task.clips] == [("from the sidecar", {"captioner": "sidecar"})] * 2
    (tmp_path / "v.txt").unlink()
    task = _task(tmp_path)
    CaptionStage().process([task])
    assert [(c.caption, c.caption_by) for c in task.clips] == [(None, {})] * 2


def test_vlm_captions_record_the_model_folder_and_prompt(tiny_blip, transcoded):  # noqa: F811
    transcoded.caption = None
    CaptionStage(captioner="vlm", captioner_options={"model_path": tiny_blip, "max_new_tokens": 4}).process([transcoded])
    assert transcoded.failure is None
    assert [c.caption_by for c in transcoded.clips] == [{"captioner": "vlm", "model": tiny_blip}] * len(transcoded.clips)
