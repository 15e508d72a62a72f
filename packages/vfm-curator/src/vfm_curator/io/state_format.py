"""The format version of a curation folder's resume state (``OUT/.state/``: records, parts, moved
markers, attempts), in ``OUT/.state/format.json``: an older vfm curate or shard meets a folder whose
state a newer one wrote with one line saying so, instead of misreading its records.

Bumped when an older vfm would misread the state (a record key renamed or given another meaning), not
for a key it may ignore. A folder without the marker (curated before it was written) is format 1; the
first run into it that holds its lock writes the marker (:func:`mark_state_format`).
"""

from __future__ import annotations

import json
from pathlib import Path

from vfm_curator.io.paths import atomic_write, output_path, safe_join
from vfm_curator.io.state import STATE

STATE_FORMAT = 1
MARKER = "format.json"


def check_state_format(out: str | Path) -> int:
    """The state format of the curation folder ``out`` (1 when it has no marker, or no ``.state`` yet);
    a newer one is refused (:class:`~vfm_plugins.formats.FormatVersionError`, one line naming the file,
    its version and the upgrade). Reads only: the check runs before a run takes the folder's lock."""
    from vfm_plugins.formats import check_json_format

    try:
        path = safe_join(out, STATE, MARKER)
    except ValueError:  # .state or the marker is a link out of the folder: check_out_folder names it
        return STATE_FORMAT
    # the marker was written with the field from the first: one without it is damaged, not older
    return check_json_format(path, what="vfm curation state", current=STATE_FORMAT, package="vfm-curator") or STATE_FORMAT


def mark_state_format(out: str | Path) -> None:
    """Write the marker where there is none (the folder's first run, or one curated before the marker
    existed: format 1, which this version writes). Called holding the folder's lock."""
    from vfm_plugins.formats import installed

    if safe_join(out, STATE, MARKER).is_file():
        return
    atomic_write(output_path(out, STATE, MARKER),
                 json.dumps({"format_version": STATE_FORMAT, "written_by": installed("vfm-curator")}, sort_keys=True).encode("utf-8"))
