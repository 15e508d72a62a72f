"""vfm_curator.io.metadata: the merged clip table is written as a new file renamed into place, never
through a link planted in the output folder."""

from __future__ import annotations

import pyarrow.parquet as pq

from vfm_curator.io.metadata import merge, table


def _row(i: int, start: int) -> dict:
    return {"id": f"clip{i}", "video_id": "v", "source": "in.mp4", "path": f"clips/clip{i}.mp4", "start_frame": start,
            "end_frame": start + 12, "start_s": start / 24, "end_s": (start + 12) / 24, "fps": 24.0, "width": 96,
            "height": 64, "num_frames": 12, "embedding": None, "caption": "x", "scores": {}, "caption_by": {}}


def test_the_merged_table_is_not_written_through_a_link_planted_at_the_old_temporary_name(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    (out / ".state").mkdir(parents=True)
    parts = [out / ".state" / "a.parquet", out / ".state" / "b.parquet"]
    pq.write_table(table([_row(1, 24)]), parts[0])
    pq.write_table(table([_row(0, 0)]), parts[1])
    (out / ".clips.parquet.tmp").symlink_to(victim)  # the name merge used to write
    assert merge(parts, out / "clips.parquet") == 2
    assert victim.read_text() == "precious"
    assert pq.read_table(out / "clips.parquet").column("id").to_pylist() == ["clip0", "clip1"]
