"""What docs/configuration.md says of the targets file is what the adapter does with it.

The page said "The file is read once at start": a user who edited it restarted the adapter for nothing, and one
who saved a half-written file expected no effect. The adapter reads it again when it changes, and keeps the last
good version when a change is broken (tests/sources/test_targets_reload.py shows both)."""

from __future__ import annotations

from pathlib import Path

from autoscaler.sources.targets import StaticTargetsDiscovery

CONFIGURATION = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()


def targets_section() -> str:
    return " ".join(CONFIGURATION.split("\n## Targets file", 1)[1].split("\n## ", 1)[0].split())


def test_the_page_says_the_file_is_read_again_when_it_changes() -> None:
    section = targets_section()
    assert "read once" not in section, section
    assert "read again when it changes" in section, section
    assert "keeps the last good" in section, section
    assert "two refreshes in a row" in section and "by rename" in section, section


async def test_what_the_page_says_is_what_the_adapter_does(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    entry = "runtimes:\n  - namespace: default\n    deployment: {}\n    pods: [{{name: p, url: 'http://127.0.0.1:1/'}}]\n"
    path.write_text(entry.format("modelmesh-serving-a"))
    discovery = StaticTargetsDiscovery(path)
    await discovery.start()
    path.write_text(entry.format("modelmesh-serving-bb"))  # another size: a change even where mtimes are coarse
    discovery.inventory()  # written in place: used once two refreshes in a row find it unchanged
    assert [key.deployment for key in discovery.inventory()] == ["modelmesh-serving-bb"]
    path.write_text("runtimes: [")
    discovery.inventory()
    assert [key.deployment for key in discovery.inventory()] == ["modelmesh-serving-bb"]
    await discovery.close()
