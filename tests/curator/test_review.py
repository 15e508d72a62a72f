"""vfm_curator.pipelines.review: the clip table rewritten without the removed clips is a new file
renamed into place, never written through a link planted in the output folder."""

from __future__ import annotations

import pyarrow.parquet as pq

from tests.curator.test_metadata import _row
from vfm_curator.io.metadata import table
from vfm_curator.pipelines.review import _drop_rows


def test_dropping_rows_does_not_write_through_a_link_planted_at_the_old_temporary_name(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    pq.write_table(table([_row(i, 12 * i) for i in range(3)]), out / "clips.parquet")
    (out / ".clips.parquet.tmp").symlink_to(victim)  # the name the rewrite used to write
    _drop_rows(out / "clips.parquet", {"clip1"})
    assert victim.read_text() == "precious"
    assert pq.read_table(out / "clips.parquet").column("id").to_pylist() == ["clip0", "clip2"]
