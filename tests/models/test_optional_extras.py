"""The optional extras of vfm-models admit only releases that have what their features import."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "packages" / "vfm-models" / "pyproject.toml"


def extra(name: str) -> dict[str, Requirement]:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return {r.name: r for r in map(Requirement, extras[name])}


def test_the_diffusers_extra_refuses_releases_without_autoencoderklwan():
    """wan-vae builds diffusers' AutoencoderKLWan, first released in diffusers 0.33.0."""
    from importlib.metadata import version

    spec = extra("diffusers")["diffusers"].specifier
    assert not spec.contains("0.32.2"), f"'vfm-models[diffusers]' admits diffusers 0.32.2, which has no AutoencoderKLWan: {spec}"
    assert spec.contains("0.33.0") and spec.contains(version("diffusers")), "the tested diffusers must stay admitted"
