"""What docs/configuration.md says a flag takes is what `--help` shows it takes, and a value a program refuses
is one line, as the "Flags and environment variables" section promises for both programs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.settings import build_parser as exporter_parser
from tests.test_docs import CONFIGURATION, subcommand

REPO = Path(__file__).resolve().parent.parent


def documented_values(section: str) -> dict[str, str]:
    """flag -> the `value` cell of its row in the table under the heading `section` of configuration.md."""
    text = CONFIGURATION.split(f"### {section}\n", 1)[1].split("\n#", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    column = rows[0].index("value")
    return {row[0].strip("`"): row[column] for row in rows[2:] if row[0].startswith("`--")}


def shown_value(action: argparse.Action) -> str | None:
    """The word `--help` prints after the flag (`--pods N`); None for a switch or a list of choices, which the
    docs spell out in words (`on` or `off`)."""
    if action.nargs == 0 or action.choices or str(action.metavar).startswith("{"):
        return None
    return str(action.metavar) if action.metavar else action.dest.upper()


def mismatches(section: str, parser: argparse.ArgumentParser) -> list[str]:
    documented = documented_values(section)
    wrong = []
    for action in parser._actions:
        flag = next((s for s in action.option_strings if s.startswith("--")), "--help")
        shown = shown_value(action)
        if flag == "--help" or shown is None:
            continue
        cell = documented.get(flag, "").replace("`", "")
        if shown not in cell.replace(",...", "").split() and shown not in cell:
            wrong.append(f"{flag}: --help shows {shown!r}, docs/configuration.md {cell!r}")
    return wrong


@pytest.mark.parametrize(("section", "parser"), [("modelmesh-exporter", exporter_parser()),
                                                 ("modelmesh-autoscaler serve", subcommand("serve")),
                                                 ("modelmesh-autoscaler demo", subcommand("demo"))],
                         ids=["modelmesh-exporter", "serve", "demo"])
def test_the_value_a_flag_takes_in_configuration_md_is_the_one_help_shows(section: str,
                                                                          parser: argparse.ArgumentParser) -> None:
    """`demo --help` showed `--duration DURATION --pods PODS` where the docs say SECONDS and N."""
    wrong = mismatches(section, parser)
    assert not wrong, "\n".join(wrong)


def test_the_value_a_simulate_flag_takes_in_configuration_md_is_the_one_help_shows() -> None:
    wrong = mismatches("modelmesh-autoscaler simulate", subcommand("simulate"))
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("flags", "environ", "says"), [
    (["--load-window", "abc"], {}, "argument --load-window: expected a number of seconds, got 'abc'"),
    ([], {"EXPORTER_LOAD_WINDOW": "abc"}, "EXPORTER_LOAD_WINDOW"),
    (["--load-window", "1"], {}, "--load-window (EXPORTER_LOAD_WINDOW) is 1 s: it must be at least"),
], ids=["flag", "variable", "rule"])
def test_a_value_the_exporter_refuses_is_one_line(flags: list[str], environ: dict[str, str], says: str,
                                                  tmp_path: Path) -> None:
    """In a sidecar's log the usage's 14 lines came first; configuration.md promises one line, as `serve`
    gives."""
    done = subprocess.run([sys.executable, "-m", "exporter.cli", *flags], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, **environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("modelmesh-exporter: error: ") and says in line, line
