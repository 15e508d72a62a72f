"""Every relative link in the documentation a user reads (README.md, packages/*/README.md, docs/*.md)
reaches a file that exists, and every #anchor names a heading of its target, as GitHub renders it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted(ROOT.glob("packages/*/README.md")), *sorted(ROOT.glob("docs/*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _prose(text: str) -> str:
    """The text links are rendered from: no fenced code blocks (a link there is code, not a link)."""
    return FENCE.sub("", text)


def github_anchor(heading: str) -> str:
    """GitHub's heading id: markup dropped, lower case, punctuation other than - and _ removed,
    each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(_prose(page.read_text(encoding="utf-8"))):
        slug = github_anchor(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(page: Path) -> list[str]:
    problems = []
    text = CODE_SPAN.sub("", _prose(page.read_text(encoding="utf-8")))
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            problems.append(f"{target}: no such file {resolved}")
        elif anchor:
            if resolved.suffix != ".md":
                problems.append(f"{target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(resolved):
                problems.append(f"{target}: {resolved.name} has no heading with the id {anchor!r}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def test_the_pages_link_to_each_other():
    """The check reads real links: the pages hold dozens, some with anchors into package READMEs."""
    links = [t for p in PAGES for t in LINK.findall(CODE_SPAN.sub("", _prose(p.read_text(encoding="utf-8"))))]
    assert len([t for t in links if not t.startswith("http")]) > 40
    assert any("#" in t and not t.startswith("http") for t in links)


def test_a_missing_file_a_wrong_anchor_and_a_duplicate_heading_are_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## Plugin hooks (entry-point group `vfm_models`)\n\n## Usage\n\n## Usage\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#plugin-hooks-entry-point-group-vfm_models) [second](other.md#usage-1)\n"
        "[gone](missing.md) [bad](other.md#plugin-hooks) [self](#nowhere) [third](other.md#usage-2)\n"
        "`[in code](nope.md)`\n\n```\n[in a block](nope.md)\n```\n"
    )
    problems = broken_links(page)
    assert [p.split(":")[0] for p in problems] == ["missing.md", "other.md#plugin-hooks", "#nowhere", "other.md#usage-2"]


#: names the pages use as made-up examples of a reader's own code (architecture.md's new plugin kind)
EXAMPLE_NAMES = {"vfm_models.widgets"}


def _resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` is a module, or an attribute reached from the longest importable prefix."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
                continue
            try:  # a submodule that its package does not import
                obj = importlib.import_module(f"{obj.__name__}.{attr}")
            except (ImportError, AttributeError):
                return False
        return True
    return False


def test_every_vfm_module_function_and_class_a_page_names_exists():
    """The pages send readers to code by dotted name (`vfm_curator.shot_detectors.torch_scorer.TorchFrameScorer`,
    `vfm_plugins.formats.check_format_version`): each must import, so that a rename shows up here."""
    named = {}
    for page in PAGES:
        for name in re.findall(r"\b(vfm_(?:models|parallel|data|curator|infer|cli|plugins)(?:\.[A-Za-z_]\w*)+)",
                               page.read_text(encoding="utf-8")):
            named.setdefault(name, str(page.relative_to(ROOT)))
    assert len(named) > 100, f"only {len(named)} dotted names found: the pattern no longer matches the pages"
    missing = [f"{page}: {name}" for name, page in sorted(named.items()) if name not in EXAMPLE_NAMES and not _resolves(name)]
    assert missing == []
