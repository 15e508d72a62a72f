"""A shard rewritten after its folder was prepared: energon's index (``<shard>.tar.idx``, the byte
offset of each sample) then points into the wrong bytes and every read of the shard fails as an
"unreadable" sample. This tells that case apart from a damaged shard, so the loader can say what
happened and what to run, instead of skipping the whole shard sample by sample.

The check runs once per shard, only when a read of it failed: it walks the tar's headers (no member
data is read) and computes the offsets energon's preparation would write now. A shard that is a
whole tar (its walk ends at an end-of-archive block) whose offsets differ from the recorded ones was
rewritten; a damaged or truncated one does not walk to its end and is left to the skip rules.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

_BLOCK = tarfile.BLOCKSIZE


def _recorded_offsets(shard: Path) -> list[int] | None:
    """The offsets in the shard's ``.tar.idx`` (one per sample, then the end of the last), read with
    energon's reader; None when there is none to read."""
    from megatron.energon.epathlib import EPath
    from megatron.energon.flavors.webdataset.itar import TarIndexReader

    try:
        with TarIndexReader(EPath(shard)) as index:
            return list(index)
    except Exception:  # noqa: BLE001 - no index or an unreadable one: nothing to compare
        return None


def _current_offsets(shard: Path) -> list[int] | None:
    """The offsets energon's preparation would record for the shard as it is now (its own member
    rules), or None when the shard is not a whole tar (damaged, truncated: not a rewrite)."""
    from megatron.energon.flavors.webdataset.prepare import WebdatasetPreparator

    offsets: list[int] = []
    try:
        with open(shard, "rb") as f, tarfile.open(fileobj=f, mode="r:") as tar:
            last = None
            for member, base_name, _ in WebdatasetPreparator._iter_tar_sample_members(tar):
                if base_name != last:
                    offsets.append(member.offset)
                    last = base_name
            end = tar.offset
            f.seek(end)
            # tarfile also stops quietly at a file cut exactly between members: a whole tar ends
            # with an end-of-archive (zero) block
            if f.read(_BLOCK) != bytes(_BLOCK):
                return None
    except (tarfile.TarError, OSError, EOFError, ValueError):
        return None
    return [*offsets, end]


def stale_index_problem(shard: Any) -> str | None:
    """How the shard differs from what its index recorded, when it is a whole tar rewritten since the
    folder was prepared; None otherwise (the index fits, or the shard is damaged)."""
    shard = Path(str(shard))
    recorded = _recorded_offsets(shard)
    if not recorded:
        return None
    current = _current_offsets(shard)
    if current is None or current == recorded:
        return None
    return (f"its index ({shard.name}.idx) records {len(recorded) - 1} samples ending at byte {recorded[-1]}, "
            f"the file now holds {len(current) - 1} ending at byte {current[-1]}")
