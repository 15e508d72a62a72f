"""``clips.parquet`` names its format version in the parquet schema's metadata: a table written before
the field (or by another tool) reads as format 1; one from a newer vfm curate is refused by ``vfm shard``
in one line naming the file, its version and the upgrade, before any row is read."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.format_versions import assert_one_line_naming
from vfm_curator.io.metadata import FORMAT_KEY, TABLE_FORMAT, merge, table, to_parquet_bytes
from vfm_curator.pipelines.clip_table import read_clip_table
from vfm_plugins.formats import FormatVersionError


def _row(i: int) -> dict:
    return {"id": f"clip{i}", "video_id": "v", "source": "in.mp4", "path": "clips/c.mp4", "start_frame": 0,
            "end_frame": 12, "start_s": 0.0, "end_s": 0.5, "fps": 24.0, "width": 96, "height": 64, "num_frames": 12,
            "embedding": None, "caption": f"a drifting pattern {i}", "scores": {}, "caption_by": {}}


def _with_format(t, value: bytes | None):
    meta = dict(t.schema.metadata or {})
    meta.pop(FORMAT_KEY, None)
    if value is not None:
        meta[FORMAT_KEY] = value
    return t.replace_schema_metadata(meta)


def test_the_merged_clip_table_and_its_parts_name_their_format(tmp_path):
    part = tmp_path / "part.parquet"
    part.write_bytes(to_parquet_bytes([_row(0)]))
    merge([part], tmp_path / "clips.parquet")
    for path in (part, tmp_path / "clips.parquet"):
        assert pq.read_schema(path).metadata[FORMAT_KEY] == str(TABLE_FORMAT).encode()


def test_a_clip_table_without_a_format_reads_as_format_1(tmp_path):
    pq.write_table(_with_format(table([_row(0), _row(1)]), None), tmp_path / "clips.parquet")
    assert [t.id for t in read_clip_table(tmp_path)] == ["clip0", "clip1"]


def test_a_clip_table_of_a_newer_format_is_refused_naming_the_file_its_version_and_the_upgrade(tmp_path):
    path = tmp_path / "clips.parquet"
    pq.write_table(_with_format(table([_row(0)]), str(TABLE_FORMAT + 1).encode()), path)
    with pytest.raises(FormatVersionError) as info:
        read_clip_table(tmp_path)
    message = str(info.value)
    assert_one_line_naming(message, str(path), f"format version {TABLE_FORMAT + 1}", "newer vfm",
                           f"reads version {TABLE_FORMAT}", "pip install -U vfm-curator")


def test_a_clip_table_format_that_is_no_number_is_refused_naming_it(tmp_path):
    pq.write_table(_with_format(table([_row(0)]), b"two"), tmp_path / "clips.parquet")
    with pytest.raises(FormatVersionError, match="whole number >= 1, got b'two'"):
        read_clip_table(tmp_path)


def test_merging_a_part_of_a_newer_format_is_refused_naming_the_part(tmp_path):
    old, new = tmp_path / "a.parquet", tmp_path / "b.parquet"
    old.write_bytes(to_parquet_bytes([_row(0)]))
    pq.write_table(_with_format(table([_row(1)]), str(TABLE_FORMAT + 1).encode()), new)
    with pytest.raises(FormatVersionError, match=f"{new} is a vfm clip table of format version {TABLE_FORMAT + 1}"):
        merge([old, new], tmp_path / "clips.parquet")
    assert not (tmp_path / "clips.parquet").exists()
    pq.write_table(_with_format(table([_row(1)]), None), new)  # a part written before the field
    assert merge([old, new], tmp_path / "clips.parquet") == 2


def test_a_clip_table_of_a_newer_format_is_refused_from_its_footer_without_reading_its_rows(tmp_path):
    """The rows' pages are damaged: only the footer (its key-value metadata) can be read, and the refusal
    names the format rather than failing on the rows."""
    path = tmp_path / "clips.parquet"
    pq.write_table(_with_format(table([_row(i) for i in range(200)]), str(TABLE_FORMAT + 1).encode()), path,
                   compression="snappy")
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8  # the footer's length and the closing "PAR1"
    data[4:-footer] = bytes(len(data) - 4 - footer)  # every page zeroed: the rows cannot be read
    path.write_bytes(bytes(data))
    with pytest.raises(OSError):  # pyarrow's error for pages it cannot decode
        pq.read_table(path).to_pylist()
    with pytest.raises(FormatVersionError, match=f"format version {TABLE_FORMAT + 1}"):
        read_clip_table(tmp_path)
