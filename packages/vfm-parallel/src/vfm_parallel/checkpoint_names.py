"""The names of a checkpoint root's folders, in one place: ``step_<N>`` (committed, N in 8 digits) and
``.old-step_<N>-<random>`` (the previous copy of a step while it is saved again; ``.old-step_<N>`` from
earlier versions). Both :mod:`vfm_parallel.checkpoint_folders` (which lists and commits them) and
:mod:`vfm_parallel.checkpoint_integrity` (which checks a state's step against its folder's) go by it."""

from __future__ import annotations

import re
from pathlib import Path

STEP_DIR = re.compile(r"^step_(\d{8})$")
#: the previous copy of a step during its re-save (the random part: this version; none: earlier ones)
ASIDE_DIR = re.compile(r"^\.old-step_(\d{8})(?:-[a-z0-9_]+)?$")
#: found in the name of any folder save() writes under: ``step_<N>``, ``.old-step_<N>-*`` (aside),
#: ``.tmp-step_<N>-*`` (being written)
SAVE_FOLDER = re.compile(r"step_\d{8}")


#: the largest step a ``step_<N>`` name holds
MAX_STEP = 10**8 - 1


def step_dir(root: Path, step: int) -> Path:
    """``root/step_<N>``; a step outside 0..MAX_STEP is refused (its folder would match no checkpoint
    name: written whole, then never listed)."""
    if not (isinstance(step, int) and not isinstance(step, bool) and 0 <= step <= MAX_STEP):
        raise ValueError(f"checkpoint step {step!r}: accepted is a whole number from 0 to {MAX_STEP} "
                         "(its folder is named step_<8 digits>)")
    return Path(root) / f"step_{step:08d}"


def folder_step(folder: Path) -> int | None:
    """The step a folder's name says (``step_00000004`` or an aside copy of it, ``.old-step_00000004-<random>``,
    ``.old-step_00000004`` in earlier versions)."""
    name = Path(folder).name
    match = STEP_DIR.match(name) or ASIDE_DIR.match(name)
    return int(match.group(1)) if match else None
