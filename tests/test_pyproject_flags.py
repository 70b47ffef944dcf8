"""The flags pyproject.toml's comments name are flags the commands take: a user picks an extra (`pod-resources`)
by the flag its comment names, and searches `--help` for it (it named `--pod-resources-socket`, which no command
has: the exporter's is `--gpu-pod-resources-socket`)."""

from __future__ import annotations

import re
from pathlib import Path

from exporter.settings import build_parser as exporter_parser
from tests.test_docs import subcommand

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_every_flag_a_comment_names_is_a_flag_of_some_command() -> None:
    parsers = [exporter_parser(), *(subcommand(name) for name in ("serve", "demo", "simulate"))]
    known = {flag for parser in parsers for action in parser._actions for flag in action.option_strings}
    comments = [line.split("#", 1)[1] for line in ours(PYPROJECT.read_text().splitlines()) if "#" in line]
    named = {flag for comment in comments for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", comment)}
    assert named, "pyproject.toml's comments name no flag: this test checks nothing"
    assert sorted(named - known) == []


def ours(lines: list[str]) -> list[str]:
    """The lines about the project's own commands: its dependencies and extras, less the test tools' list (whose
    comments name pytest's flags) and the [tool.*] tables."""
    kept, section, in_test_tools = [], "", False
    for line in lines:
        if line.startswith("["):
            section = line.strip("[] ")
        elif line.startswith("test = ["):
            in_test_tools = True
        elif in_test_tools and line.startswith("]"):
            in_test_tools = False
        elif section.startswith("project") and not in_test_tools:
            kept.append(line)
    return kept
