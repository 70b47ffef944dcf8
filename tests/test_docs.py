"""The user documentation stays complete and self-contained: every flag, variable and policy key is in
docs/configuration.md, and README.md and docs/ link only to files and headings that exist in the repository."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields
from pathlib import Path

import pytest

from autoscaler import cli
from autoscaler.names import POLICY_ANNOTATION_PREFIX
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.settings import env_variables
from exporter.settings import build_parser as exporter_parser

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices[name]
    return found


def long_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings if s.startswith("--")} - {"--help"}


@pytest.mark.parametrize("parser", [exporter_parser(), subcommand("serve"), subcommand("demo")],
                         ids=["modelmesh-exporter", "serve", "demo"])
def test_configuration_lists_every_flag(parser: argparse.ArgumentParser) -> None:
    missing = sorted(flag for flag in long_flags(parser) if f"| `{flag}` |" not in CONFIGURATION)
    assert not missing, f"docs/configuration.md has no table row for {missing}"


def test_configuration_lists_every_environment_variable() -> None:
    exporter = ["EXPORTER_" + f.removeprefix("--").replace("-", "_").upper() for f in long_flags(exporter_parser())]
    missing = sorted(v for v in [*exporter, *env_variables()] if f"`{v}`" not in CONFIGURATION)
    assert not missing, f"docs/configuration.md does not name {missing}"


def test_configuration_lists_every_policy_key_and_its_annotation() -> None:
    for field in fields(RuntimePolicy):
        annotation = POLICY_ANNOTATION_PREFIX + field.name.replace("_", "-")
        assert f"| `{field.name}` | `{annotation}` |" in CONFIGURATION, field.name


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(path: Path) -> None:
    text = path.read_text()
    assert "shared/" not in text and "DESIGN" not in text, "cite docs/design.md, not the project's notes"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        assert linked.is_relative_to(REPO) and linked.exists(), f"{path.name}: broken link {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{path.name}: no heading for #{anchor} in {linked.name}"
