"""Each library's torch lower bound admits no release without a torch API its code calls.

The table holds, per package, a piece of source that uses an API and the first torch release that
has it; the package's declared `torch` requirement must refuse the release before that one."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]

# (package, source text using the API, first torch release with it, the release before)
APIS = [
    ("vfm-models", "enable_gqa=", "2.5.0", "2.4.1"),  # F.scaled_dot_product_attention's GQA flag
    ("vfm-parallel", "from torch.distributed.fsdp import", "2.6.0", "2.5.1"),  # FSDP2 fully_shard made public
    ("vfm-parallel", "HuggingFaceStorageWriter", "2.8.0", "2.7.1"),  # DCP to safetensors
    # each rank writes its own safetensors files; 2.8's writer raised TypeError on the keyword (every save failed)
    ("vfm-parallel", "save_distributed=True", "2.9.0", "2.8.0"),
]


def torch_requirement(package: str) -> Requirement:
    project = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]
    (torch,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "torch"]
    return torch


@pytest.mark.parametrize(("package", "usage", "first", "before"), APIS, ids=[f"{p}-torch{f}" for p, _, f, _ in APIS])
def test_torch_lower_bound_refuses_releases_without_the_apis_the_code_calls(package, usage, first, before):
    sources = "".join(p.read_text() for p in (ROOT / "packages" / package / "src").rglob("*.py"))
    assert usage in sources, f"{package} no longer uses {usage!r}: update this table"
    spec = torch_requirement(package).specifier
    assert not spec.contains(before), f"{package} declares torch{spec}, which admits {before}: it lacks {usage!r}"
    assert spec.contains("2.13.0"), "the dev and CI pin must stay admitted"
