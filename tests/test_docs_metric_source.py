"""README's "Adding a metric source" names everything the `MetricSource` protocol asks of a new source: it listed
name, errors, collect and close, and a class written from it lacked reads, partial_answers, problems and
scrape_urls (mypy refused it at `build_source`, or /debug failed). What `SourceDefaults` supplies may be left to
it, if the step says to inherit it."""

from __future__ import annotations

import re

from autoscaler.sources.base import MetricSource, SourceDefaults
from tests.test_docs_repo_paths import REPO


def protocol_members() -> set[str]:
    return {name for name in (*vars(MetricSource), *MetricSource.__annotations__)
            if not name.startswith("_")}


def named_in_the_first_step() -> set[str]:
    section = (REPO / "README.md").read_text().split("## Adding a metric source\n", 1)[1]
    step = section.split("\n1. ", 1)[1].split("\n2. ", 1)[0]
    return set(re.findall(r"`(?:async )?(\w+)", step))


def test_the_first_step_names_every_member_a_new_source_must_write() -> None:
    named = named_in_the_first_step()
    supplied = {name for name in protocol_members() if hasattr(SourceDefaults, name)} if "SourceDefaults" in named \
        else set()
    assert protocol_members() - supplied <= named, (
        f"README's step 1 leaves out {sorted(protocol_members() - supplied - named)}")


def test_the_protocols_members_are_read() -> None:
    assert {"name", "errors", "reads", "partial_answers", "problems", "scrape_urls", "collect",
            "close"} == protocol_members()
