"""Failure records: what failed, why (``cause``: input, config or machine; ``kind``: a short reason
name), and the rule that decides whether a later run does a failed item again.

Rule (:func:`should_retry`), in order:

- ``retry`` (``--retry-failed``) is ``"all"``, or names the record's ``kind`` or ``cause``: redo.
- the input changed since the failure (a video's size or modification time; a clip's file or its
  row of ``clips.parquet``, caption included): redo, whatever the cause.
- ``cause == "machine"`` (a worker crashed, ran out of memory or timed out): redo while fewer than
  ``max_attempts`` attempts were made (``[run] max_attempts``, counted across runs).
- ``cause == "config"``: redo when the hash of the options that decided the failure (the stages up
  to and including the one that failed) differs from the one recorded: a changed config may fix it.
- ``cause == "input"``: not redone (the same input would fail the same way).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from typing import Any

from vfm_curator.errors import InputError

CAUSES = ("input", "config", "machine")
#: Reason kinds a record may carry (``--retry-failed KIND``); stages may add their own.
KINDS = (
    "unusable-input", "bad-name", "no-clips", "all-filtered", "too-short", "too-large", "no-caption",
    "caption-endpoint", "error", "worker-crash", "out-of-memory", "timeout", "stage-setup", "plugin-error",
)


def classify(exc: BaseException, by_plugin: bool = False) -> tuple[str, str]:
    """(cause, kind) of an exception raised while processing one item. ``by_plugin``: a plugin's code
    (not vfm-curator's) raised it, so an unexpected error is that plugin's bug, not the item's."""
    if isinstance(exc, InputError):
        return exc.cause, exc.kind
    if isinstance(exc, MemoryError) or _device_out_of_memory(exc):
        return "machine", "out-of-memory"
    if isinstance(exc, TimeoutError):
        return "machine", "timeout"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOMEM, errno.EIO):
        return "machine", "out-of-memory" if exc.errno == errno.ENOMEM else "error"
    if by_plugin:  # config: the config chose the plugin; a mended plugin is redone by --retry-failed plugin-error
        return "config", "plugin-error"
    return "input", "error"  # an unexpected error on one item in vfm-curator's own code: that item triggered it


def _device_out_of_memory(exc: BaseException) -> bool:
    """A GPU ran out of memory (an embedder, captioner or decoder on CUDA): a machine failure that a
    later run may not meet, never the video's fault. ``torch.OutOfMemoryError`` is a RuntimeError, not a
    MemoryError; other libraries (DALI, CuPy, PyNvVideoCodec) raise their own types named alike or
    RuntimeErrors that say so. Recognised by name and text, so vfm-curator need not import them."""
    if "OutOfMemory" in type(exc).__name__:
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def classify_worker_error(exc: BaseException) -> tuple[str, str]:
    """(cause, kind) of a Ray call that died as a whole (not one item inside it)."""
    name = type(exc).__name__
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, type(exc)):
        if type(cause).__name__ == "StageSetupError":
            return "config", "stage-setup"
        return classify(cause)
    if "OutOfMemory" in name:
        return "machine", "out-of-memory"
    if "Timeout" in name or "Cancel" in name:
        return "machine", "timeout"
    return "machine", "worker-crash"  # WorkerCrashedError, RayActorError, a killed process...


def options_hash(stage_options: list[tuple[str, dict[str, Any]]], failed_stage: str) -> str:
    """Hash of the options of the stages up to and including ``failed_stage`` (all stages when it is
    not among them): the part of the config that decided the failure."""
    upto = []
    for name, options in stage_options:
        upto.append([name, {k: v for k, v in options.items() if k != "out"}])
        if name == failed_stage:
            break
    text = json.dumps(upto, sort_keys=True, default=repr)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def input_stamp(path: str) -> list[int] | None:
    """(size, mtime_ns) of an input file, or None when it cannot be read."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_size, st.st_mtime_ns]


def retry_choices() -> str:
    return ", ".join(("all", *CAUSES, *KINDS))


def check_retry(retry: str | None) -> str | None:
    """``--retry-failed``'s value: None, "all", a cause or a kind; anything else is an error."""
    if retry is None:
        return None
    if retry not in ("all", *CAUSES, *KINDS):
        raise ValueError(f"--retry-failed {retry!r}: unknown reason; accepted: {retry_choices()}")
    return retry


def should_retry(failure: dict[str, Any], *, retry: str | None, max_attempts: int, options_digest: str | None,
                 stamp: list[int] | None) -> bool:
    """Whether a failed item is done again (see the module docstring for the rule)."""
    cause, kind = failure.get("cause", "input"), failure.get("kind", "error")
    if retry is not None and retry in ("all", cause, kind):
        return True
    recorded = failure.get("input_stamp")
    if recorded is not None and stamp is not None and list(recorded) != list(stamp):
        return True
    if cause == "machine":
        return int(failure.get("attempts", 1)) < max_attempts
    if cause == "config":
        return options_digest is not None and failure.get("options_hash") != options_digest
    return False
