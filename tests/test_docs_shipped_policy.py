"""What docs/configuration.md says of the shipped policy ConfigMap is what it ships: a user deciding where to
set `--scale-down-tau` (a flag the file replaces where it sets the key) reads it there."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from autoscaler.policies.policy_origins import _FLAGS as FLAG_OF_KEY
from tests.manifests.support import BASE, find, kustomize

REPO = Path(__file__).resolve().parent.parent
CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()


def shipped_policy() -> dict[str, object]:
    config_map = find(kustomize(BASE), "ConfigMap", "modelmesh-autoscaler-policy")
    policy: dict[str, object] = yaml.safe_load(config_map["data"]["policy.yaml"])
    return policy


def documented_shipped_file() -> dict[str, object]:
    """The YAML block that follows "The shipped ConfigMap ... holds"."""
    after = CONFIGURATION.split("The shipped ConfigMap", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", after, flags=re.S)
    assert block, "configuration.md no longer shows the shipped file: update this test"
    shown: dict[str, object] = yaml.safe_load(block.group(1))
    return shown


def test_the_file_shown_as_shipped_is_the_shipped_file() -> None:
    """The page showed a `runtimes:` entry for triton (`target_rps_per_pod: 120`) that the ConfigMap does not
    hold: a user reading "holds" expected triton scaled on its request rate."""
    assert documented_shipped_file() == shipped_policy()


def test_the_flags_the_shipped_file_replaces_are_the_ones_the_page_names() -> None:
    """It said "the shipped file restates every default"; it restates two of the four flags' keys, so
    `--max-staleness 60` (which operations.md advises for 30 s scrapes) applies and `--scale-down-tau` does not."""
    defaults = shipped_policy().get("defaults") or {}
    assert isinstance(defaults, dict)
    replaced = {flag.split()[0] for key, flag in FLAG_OF_KEY.items() if key in defaults}
    sentence = re.search(r"the shipped file (?:restates|sets) (.*?)\)", CONFIGURATION, flags=re.S)
    assert sentence, "configuration.md no longer says which flags the shipped file replaces: update this test"
    named = set(re.findall(r"`(--[\w-]+)`", sentence.group(1)))
    assert named == replaced, f"the page names {sorted(named)}; the shipped file replaces {sorted(replaced)}"
