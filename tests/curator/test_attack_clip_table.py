"""Attack: a clips folder from someone else (``vfm curate``'s output: clips/*.mp4 + clips.parquet) whose
table holds a row vfm curate never writes: an id that is no sample key (``a.b``, ``../x``), a
non-finite frame rate or span. ``vfm shard`` decoded and tokenized the clips, then stopped mid-run at
that row's write (a ValueError from the shard writer or the sample metadata) and dropped the open
shards. Now the table is refused whole, naming the row and what is accepted, before any clip is
worked on (real mp4, real clip table, the real sharding pipeline)."""

from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.io.metadata import table
from vfm_curator.synth import make_video


def _row(i: int, **values) -> dict:
    return {"id": f"clip{i}", "video_id": "v", "source": "in.mp4", "path": "clips/c.mp4", "start_frame": 0,
            "end_frame": 12, "start_s": 0.0, "end_s": 0.5, "fps": 24.0, "width": 96, "height": 64, "num_frames": 12,
            "embedding": None, "caption": f"a drifting pattern {i}", "scores": {}, "caption_by": {}, **values}


@pytest.mark.parametrize("bad, named", [
    ({"id": "a.b"}, "the id is not a sample key"),
    ({"id": "../../x"}, "the id is not a sample key"),
    ({"fps": math.nan}, "fps = nan"),
    ({"end_s": math.inf}, "end_s = inf"),
    ({"path": "../elsewhere.mp4"}, "leaves the clips folder"),
], ids=["dot", "slashes", "nan-fps", "inf-span", "path"])
def test_a_clip_table_row_vfm_curate_never_writes_is_refused_before_any_work(tmp_path, bad, named):
    clips = tmp_path / "clips"
    make_video(clips / "clips" / "c.mp4", [12], width=96, height=64, seed=0)
    pq.write_table(table([_row(0), _row(1), _row(2, **bad)]), clips / "clips.parquet")
    out = tmp_path / "shards"
    with pytest.raises(ValueError) as info:
        vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, tokenizer="pixel", text_encoder="hash",
                          resolutions=[[64, 96]], frames=[9], tokenizer_options={"patch": 2}, patch_size=2)
    message = str(info.value)
    assert f"clips.parquet row 2 (id {bad.get('id', 'clip2')!r}): " in message and named in message, message
    assert "accepted:" in message
    assert not list(out.glob("*/shard-*.tar")) and not (out / ".state").exists()  # nothing was worked on
