"""Switching the shipped adapter to Prometheus as its Deployment's comment says, done literally, reads Prometheus.

The comment said to uncomment `--source=prometheus` and its lines; the `--source=scrape` below them stayed, and
argparse keeps the last of a flag given twice: the adapter went on scraping the exporters, and one who then let
only Prometheus reach them got 503 for every runtime (s64 reviewer). The test does the edit the comment asks for,
renders the base with it, and reads the adapter's args as the container will.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from autoscaler.preflight import _warn_settings_of_the_other_source
from autoscaler.unused_settings import unused_settings
from tests.manifests.support import BASE, find, kustomize
from tests.manifests.test_manifests import serve_settings

COMMENTED_SOURCE = "#   - --source=prometheus"
"""The first line of the commented Prometheus arguments in deployment.yaml."""


def follow_the_comment(text: str) -> str:
    """deployment.yaml after the edit its Prometheus comment asks for: the commented arguments uncommented (at the
    arguments' own indentation), in place of the `--source=scrape` line where the comment says to replace it."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip() == COMMENTED_SOURCE)
    column = lines[first].index("#")
    start = first
    while lines[start - 1].strip().startswith("#"):
        start -= 1
    prose = " ".join(line.strip().removeprefix("#").strip() for line in lines[start:first])
    end = first
    while lines[end][column:].startswith("#   "):
        end += 1
    block = [line[:column] + line[column + 4:] for line in lines[first:end]]
    edited = lines[:first] + block + lines[end:]
    if "replace the `- --source=scrape` line" in prose:
        (scrape,) = [i for i, line in enumerate(edited) if line.strip() == "- --source=scrape"]
        edited[scrape:scrape + 1] = []
    return "\n".join(edited) + "\n"


def test_the_deployment_switched_to_prometheus_as_its_comment_says_reads_prometheus(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = tmp_path / "base"
    shutil.copytree(BASE, base)
    (base / "deployment.yaml").write_text(follow_the_comment((BASE / "deployment.yaml").read_text()))
    settings = serve_settings(find(kustomize(base), "Deployment", "modelmesh-autoscaler"))
    assert settings.source == "prometheus", "the adapter still scrapes the exporters after the comment's edit"
    assert settings.prometheus_url and settings.prometheus_series_selector
    assert settings.overridden == (), f"a flag given twice: {settings.overridden}"
    assert unused_settings(settings) == []
    with caplog.at_level(logging.WARNING):
        _warn_settings_of_the_other_source(settings)
    assert caplog.messages == []
