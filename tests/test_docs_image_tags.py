"""The image the docs build, push and deploy carries its revision and a tag of its own.

A reader who upgrades by copying the README's build commands pushed `:0.1.0` again: nodes that cached that tag
(the manifests pull `IfNotPresent`) kept running the old code, and `--version` and the `*_build_info` series
said `unknown`, so nothing showed which build ran (docs/operations.md, Which build runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", REPO / "manifests" / "README.md", *(REPO / "docs").glob("*.md")])

# A reference to a registry's copy of the project's image, with its tag (the published name is ghcr.io's).
IMAGE_REF = re.compile(r"[\w.-]+(?:/[\w.-]+)*/modelmesh-autoscaler:([\w.$<>{}-]+)")
VERSION_ONLY = re.compile(r"\d+\.\d+\.\d+")


def code_lines(page: Path) -> list[str]:
    """The lines of the page's fenced code blocks: what a reader copies and runs."""
    lines, inside = [], False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def relative(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_docker_build_a_page_shows_writes_the_revision(page: Path) -> None:
    builds = [line for line in code_lines(page) if "docker build" in line]
    unnamed = [line.strip() for line in builds if "--build-arg REVISION=" not in line]
    assert not unnamed, f"{relative(page)}: an image built without its revision says 'unknown': {unnamed}"


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_no_page_pushes_or_deploys_a_bare_version_tag(page: Path) -> None:
    reused = [line.strip() for line in code_lines(page)
              for tag in IMAGE_REF.findall(line) if VERSION_ONLY.fullmatch(tag)]
    assert not reused, (f"{relative(page)}: a version-only tag is pushed again by every build, and nodes that "
                        f"cached it keep the old code; give each build its own (0.1.0-$REV): {reused}")


def test_the_pages_show_a_build() -> None:
    """Else the tests above check nothing: the README's walk-through builds the image."""
    assert any("docker build" in line for page in PAGES for line in code_lines(page))
