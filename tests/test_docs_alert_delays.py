"""Where the docs say after how long `ModelMeshAutoscalerRefreshStalled` fires, they say what the shipped rule does.

operations.md said it fires "over 5 minutes" and "where no restart came within 5 minutes", but the rule fires on
`modelmesh_autoscaler_values_age_seconds > 300` held `for: 2m`: values 7 minutes old. An on-call engineer waiting
out 5 minutes for the alert that tells a hung refresh from a slow one waited 2 more.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.manifests.support import PROMETHEUS, load_yaml

OPERATIONS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
ALERT = "ModelMeshAutoscalerRefreshStalled"


def minutes_until_it_fires() -> float:
    """The values' age at which the shipped rule fires: its threshold, held for its `for`."""
    [rule] = [rule for group in load_yaml(PROMETHEUS / "rules.yaml")["groups"] for rule in group["rules"]
              if rule.get("alert") == ALERT]
    threshold = re.fullmatch(r"modelmesh_autoscaler_values_age_seconds\{[^}]*\} > (\d+)", rule["expr"].strip())
    held = re.fullmatch(r"(\d+)m", rule["for"])
    assert threshold is not None and held is not None, rule  # a new shape: teach this test to read it
    return int(threshold[1]) / 60 + int(held[1])


def test_every_delay_the_docs_give_the_stalled_refresh_alert_is_the_rules() -> None:
    text = " ".join(OPERATIONS.read_text().split())
    said = [re.search(r"(\d+) minutes", text[found.end():found.end() + 120])
            for found in re.finditer(f"`{ALERT}`", text)]
    figures = [float(found[1]) for found in said if found is not None]
    assert len(figures) >= 3, said  # the metrics table, the alerts list, the hung-refresh runbook
    assert set(figures) == {minutes_until_it_fires()}, figures
