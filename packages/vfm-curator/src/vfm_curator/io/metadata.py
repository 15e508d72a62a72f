"""The clip metadata table (``clips.parquet``): schema, per-video parts, and the merged table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCHEMA_FIELDS = (
    "id", "video_id", "source", "path", "start_frame", "end_frame", "start_s", "end_s", "fps",
    "width", "height", "num_frames", "embedding", "caption", "scores", "caption_by",
)
#: The clip table's format version, in the parquet schema's metadata under :data:`FORMAT_KEY`: bumped when
#: an older vfm shard would misread the table (a column renamed or given another meaning), not for a column
#: it may ignore. A table without it (written before the field, or by another tool) is format 1.
TABLE_FORMAT = 1
FORMAT_KEY = b"vfm_clip_table_format"


def schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("video_id", pa.string()),
            ("source", pa.string()),
            ("path", pa.string()),  # relative to the output folder: clips/<id>.mp4
            ("start_frame", pa.int64()),
            ("end_frame", pa.int64()),  # exclusive
            ("start_s", pa.float64()),
            ("end_s", pa.float64()),
            ("fps", pa.float64()),
            ("width", pa.int32()),
            ("height", pa.int32()),
            ("num_frames", pa.int32()),
            ("embedding", pa.list_(pa.float32())),
            ("caption", pa.string()),
            ("scores", pa.map_(pa.string(), pa.float64())),
            # where the caption came from: captioner (manifest, sidecar or its name), model, prompt
            ("caption_by", pa.map_(pa.string(), pa.string())),
        ],
        metadata={FORMAT_KEY: str(TABLE_FORMAT).encode()},
    )


def table_format(parquet_schema, where: str) -> int:
    """The clip table format of a table with ``parquet_schema`` (read from ``where``), checked: a newer
    one is refused (:class:`~vfm_plugins.formats.FormatVersionError`) naming the file and the upgrade."""
    from vfm_plugins.formats import check_format_version

    raw = (parquet_schema.metadata or {}).get(FORMAT_KEY)
    try:
        found = None if raw is None else int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        found = raw  # named as it is by the refusal
    return check_format_version(found, where=where, what="vfm clip table", current=TABLE_FORMAT,
                                package="vfm-curator", missing=1)


def table(rows: list[dict[str, Any]]):
    import pyarrow as pa

    rows = [{**r, "scores": sorted(r["scores"].items()), "caption_by": sorted(dict(r.get("caption_by") or {}).items())} for r in rows]
    return pa.Table.from_pylist(rows, schema=schema())


def to_parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table(rows), sink)
    return sink.getvalue().to_pybytes()


def merge(parts: list[Path], dest: Path) -> int:
    """Concatenate the per-video parts into ``dest`` (sorted by source and start); returns rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from vfm_plugins.files import fresh_file

    for p in parts:  # read with this version's schema, a newer part's renamed column would come back empty
        table_format(pq.read_schema(p), str(p))
    tables = [pq.read_table(p, schema=schema()) for p in parts]
    merged = pa.concat_tables(tables) if tables else table([])
    merged = merged.sort_by([("source", "ascending"), ("start_frame", "ascending")])
    with fresh_file(dest) as tmp:  # never written through a link planted in the folder
        pq.write_table(merged, tmp)
    return merged.num_rows
