"""operations.md's Upgrading section tells what upgrading from the previous release (c32c335, captured in
tests/upgrade/c32c335-manifests.yaml) needs: what its patches set that today's no longer do, what today's set that
its did not, the examples and alerts added since. A platform engineer reads that section alone before a rollout;
what it leaves out is found in a runtime's sidecar refused at start, or an alert read for the first time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.support import alert_names

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "manifests" / "examples"
OLD: dict[str, Any] = yaml.safe_load((REPO / "tests" / "upgrade" / "c32c335-manifests.yaml").read_text())


def upgrading() -> str:
    text = (REPO / "docs" / "operations.md").read_text()
    start = text.index("\n## Upgrading\n")
    return " ".join(text[start:text.index("\n## ", start + 1)].split())  # lines rewrapped


def env_names(entries: list[dict[str, Any]]) -> set[str]:
    return {entry["name"] for entry in entries}


def patch_env(name: str) -> set[str]:
    """The variables a patch of manifests/examples adds to the sidecar (its own entries, or one entry an op)."""
    names: set[str] = set()
    for op in yaml.safe_load((EXAMPLES / name).read_text()):
        value = op.get("value")
        if isinstance(value, dict) and "env" in value:
            names |= env_names(value["env"])
        elif isinstance(value, dict) and "name" in value and ("value" in value or "valueFrom" in value):
            names.add(value["name"])
    return names


def changes() -> list[tuple[str, str]]:
    """(what changed, the word the section must name) for each difference from the old release."""
    found = []
    for patch, key in (("exporter-sidecar-patch.yaml", "exporter_sidecar_patch_env"),
                       ("exporter-pod-resources-patch.yaml", "exporter_pod_resources_patch_env")):
        old, new = env_names(OLD[key]), patch_env(patch)
        found += [(f"{patch} sets it now", name) for name in sorted(new - old)]
        found += [(f"{patch} no longer sets it", name) for name in sorted(old - new)]
    folders = {path.name for path in EXAMPLES.iterdir() if path.is_dir()}
    found += [("a new example", f"manifests/examples/{name}") for name in sorted(folders - set(OLD["example_folders"]))]
    found += [("a new alert", name) for name in alert_names() if name not in OLD["alerts"]]
    return found


def test_there_are_changes_to_tell() -> None:
    assert changes()  # else the parametrized test below checks nothing: refresh the fixture for the next release


@pytest.mark.parametrize(("change", "word"), changes())
def test_the_upgrading_section_names_each_change_since_the_previous_release(change: str, word: str) -> None:
    assert word in upgrading(), f"operations.md, Upgrading, does not name {word} ({change})"
