"""Shot detectors, a plugin kind (``vfm_curator_register_shot_detectors``): ``content`` (HSV
colour change, PySceneDetect's ContentDetector rule), ``adaptive`` (its AdaptiveDetector rule:
the change relative to a rolling average) and ``transnetv2`` (the TransNet V2 network, local
safetensors weights). The ``split`` stage picks one by name (``method``)."""

from __future__ import annotations

from typing import Any

from vfm_curator.shot_detectors.base import ShotDetector

__all__ = ["ShotDetector", "apply_shot_options", "build_detector"]


def build_detector(name: str, options: dict[str, Any] | None = None) -> ShotDetector:
    """The registered detector ``name`` built with ``options`` (an unknown name lists the available ones)."""
    from vfm_curator.plugins import host

    cls = host.get("shot_detectors", name)
    return cls(**dict(options or {}))


def apply_shot_options(config, detector: str | None, options: list[str]) -> None:
    """``vfm curate --shot-detector NAME --shot-option KEY=VALUE ...``: set the split stage's ``method``
    and ``detector_options`` in ``config`` (a :class:`~vfm_curator.config.CurateConfig`). Another
    detector than the config's starts from no options. ``ValueError`` for a malformed option."""
    import json

    if detector is None and not options:
        return
    if "split" not in config.stages:
        raise ValueError(f"--shot-detector and --shot-option need the split stage; the configured stages are "
                         f"{', '.join(config.stages)}")
    split = config.options.setdefault("split", {})
    if detector is not None and detector != split.get("method", "content"):
        split["method"] = detector
        split.pop("detector_options", None)
        for key in ("threshold", "adaptive_ratio"):  # the content detector's, from an older config
            split.pop(key, None)
    parsed = dict(split.get("detector_options") or {})
    for item in options:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--shot-option {item!r}: accepted: KEY=VALUE (e.g. threshold=0.4)")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        parsed[key.strip()] = value
    if split.get("method") == "stride":  # no detector: the one option is the stride itself
        unknown = sorted(set(parsed) - {"stride_s"})
        if unknown:
            raise ValueError(f"--shot-option {unknown[0]}: the stride method takes only stride_s")
        split.update(parsed)
        split.pop("detector_options", None)
    elif parsed:
        split["detector_options"] = parsed
